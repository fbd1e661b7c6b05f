/* SPDX-License-Identifier: MIT */
/* Unit tests of common/sha256.c against the FIPS 180-4 examples. */
#include <string.h>

#include "sha256.h"
#include "test_util.h"

static void digest(const char *msg, size_t reps, char out[65])
{
	struct sha256 c;
	sha256_init(&c);
	for (size_t i = 0; i < reps; i++)
		sha256_update(&c, msg, strlen(msg));
	sha256_final_hex(&c, out);
}

START_TEST(fips_vectors)
{
	char h[65];
	digest("abc", 1, h);
	ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	digest("", 1, h);
	ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1, h);
	ck_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* a million 'a', fed in pieces that straddle the 64-byte blocks */
	digest("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	       10000, h);
	ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sha256");
	TCase *tc = tcase_create("sha256");
	tcase_add_test(tc, fips_vectors);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
