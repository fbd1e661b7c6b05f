/* SPDX-License-Identifier: MIT */
/* Fuzz target: the manifest reader, JSON and protobuf binary, followed by validation. */
#include <stdint.h>
#include <stdlib.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;

	if (size > 0 && data[0] == '{') {
		if (manifest_from_json((const char *)data, size, &m, &err) < 0)
			return 0;
	} else {
		m = pim__manifest__unpack(NULL, size, data);
		if (!m)
			return 0;
	}
	if (manifest_validate(m, &err) == 0) {
		json_object *j = manifest_to_json(m);
		json_object_put(j);
	}
	pim__manifest__free_unpacked(m, NULL);
	return 0;
}
