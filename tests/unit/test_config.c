/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/config.c: pimd.conf(5) parsing. */
#include <fcntl.h>
#include <string.h>
#include <syslog.h>

#include "config.h"
#include "frame.h"
#include "test_util.h"

static int parse(struct config *c, const char *text, struct pim_error *err)
{
	return config_parse(c, text, strlen(text), "test.conf", err);
}

START_TEST(defaults)
{
	struct config c;
	config_init(&c);
	ck_assert_str_eq(c.socket_path, "/run/pimd/pimd.sock");
	ck_assert_str_eq(c.state_dir, "/var/lib/pimd");
	ck_assert_uint_eq(c.max_frame_bytes, 16u << 20);
	ck_assert_int_eq(c.log_level, LOG_INFO);
	/* b_cpu 0: the bandwidth pimd measures on its platform; the rest as the placement module */
	ck_assert(c.placement.b_cpu == 0);
	ck_assert(c.placement.sigma == 0.4);
	ck_assert(c.placement.theta_ratio == 0.12);
	ck_assert_uint_eq(c.profile_concurrency, 1);
	ck_assert_uint_eq(c.profile_repetitions, 10);
	ck_assert_str_eq(c.pim_config, "");
	/* connection limits (pimd.conf(5)) */
	ck_assert_uint_eq(c.max_clients_per_uid, 64);
	ck_assert_uint_eq(c.handshake_timeout_ms, 5000);
	ck_assert_uint_eq(c.idle_timeout_s, 600);
	ck_assert_uint_eq(c.max_buffered_bytes, 128u << 20);
}
END_TEST

START_TEST(catalogue_keys)
{
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	ck_assert_str_eq(c.catalogue, "");
	ck_assert_uint_eq(c.catalogue_timeout_ms, 5000);
	int r = parse(&c, "catalogue = postgresql://pimd@db.example:5433/fleet?sslmode=verify-full\n"
			  "catalogue_host_id = rack3-node17\ncatalogue_platform = spr-2s-512g\n"
			  "catalogue_timeout_ms = 2000\n", &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_str_eq(c.catalogue, "postgresql://pimd@db.example:5433/fleet?sslmode=verify-full");
	ck_assert_str_eq(c.catalogue_host_id, "rack3-node17");
	ck_assert_str_eq(c.catalogue_platform, "spr-2s-512g");
	ck_assert_uint_eq(c.catalogue_timeout_ms, 2000);
	config_init(&c);
	ck_assert_int_eq(parse(&c, "catalogue = service=fleet sslmode=require\n", &err), 0);
	/* a password never comes from pimd.conf: URI user info, a query or keyword form */
	static const char *const secret[] = {
		"catalogue = postgresql://pimd:hunter2@db/fleet\n",
		"catalogue = postgres://db/fleet?password=hunter2\n",
		"catalogue = host=db password=hunter2\n",
	};
	for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++) {
		config_init(&c);
		ck_assert_int_eq(parse(&c, secret[i], &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "must not carry a password: put it in a credentials file"), "%s", err.msg);
		ck_assert_str_eq(c.catalogue, "");
	}
	ck_assert_int_eq(parse(&c, "catalogue = db.example\n", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "neither a postgresql:// URI nor keyword=value pairs"), "%s", err.msg);
	ck_assert_int_eq(parse(&c, "catalogue_host_id = two words\n", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "catalogue_host_id must be 1..64 printable"), "%s", err.msg);
	ck_assert_int_eq(parse(&c, "catalogue_timeout_ms = 10\n", &err), -EINVAL);
}
END_TEST

START_TEST(connection_limits)
{
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	int r = parse(&c, "max_clients_per_uid = 3\nhandshake_timeout_ms = 250\nidle_timeout_s = 0\n"
			  "max_buffered_bytes = 32M\n", &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_uint_eq(c.max_clients_per_uid, 3);
	ck_assert_uint_eq(c.handshake_timeout_ms, 250);
	ck_assert_uint_eq(c.idle_timeout_s, 0);
	ck_assert_uint_eq(c.max_buffered_bytes, 32u << 20);
	/* one frame of the largest size must fit in the buffers */
	config_init(&c);
	ck_assert_int_lt(parse(&c, "max_frame_bytes = 64M\nmax_buffered_bytes = 32M\n", &err), 0);
	ck_assert_str_eq(err.msg, "test.conf: max_buffered_bytes (33554432) is smaller than "
			 "max_frame_bytes (67108864)");
	ck_assert_uint_eq(c.max_frame_bytes, 16u << 20);
	ck_assert_int_lt(parse(&c, "handshake_timeout_ms = 99\n", &err), 0);
	ck_assert_msg(strstr(err.msg, "between 100 and 600000"), "%s", err.msg);
	ck_assert_int_lt(parse(&c, "max_clients_per_uid = 0\n", &err), 0);
}
END_TEST

START_TEST(values_and_comments)
{
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	int r = parse(&c, "# a comment\n\n  socket = /tmp/x.sock  \nmax_frame_bytes=1M\n"
			  "max_pending_bytes = 2G\nlog_level = debug\nmax_clients = 8\n"
			  "max_requests_in_flight = 4\nbusy_timeout_ms = 0\nstate_dir = /srv/pimd\n", &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_str_eq(c.socket_path, "/tmp/x.sock");
	ck_assert_str_eq(c.state_dir, "/srv/pimd");
	ck_assert_uint_eq(c.max_frame_bytes, 1048576);
	ck_assert_uint_eq(c.max_pending_bytes, 2ull << 30);
	ck_assert_int_eq(c.log_level, LOG_DEBUG);
	ck_assert_uint_eq(c.max_clients, 8);
	ck_assert_uint_eq(c.max_requests_in_flight, 4);
	ck_assert_uint_eq(c.busy_timeout_ms, 0);
	ck_assert_int_eq(parse(&c, "sigma = 0.3\nb_cpu = 2e10\nprofile_repetitions = 25\n"
				  "pim_config = /etc/pimd/hbm.conf\n", &err), 0);
	ck_assert(c.placement.sigma == 0.3);
	ck_assert(c.placement.b_cpu == 2e10);
	ck_assert_uint_eq(c.profile_repetitions, 25);
	ck_assert_str_eq(c.pim_config, "/etc/pimd/hbm.conf");
	/* JIT-Q: the accelerator's throughput per MX format; 0 (unset) leaves the planner's */
	ck_assert(c.jitq_speedup[0] == 0 && c.jitq_speedup[1] == 0 && c.jitq_speedup[2] == 0);
	ck_assert_int_eq(parse(&c, "speedup_mx6 = 3\nspeedup_mx4 = 4.5\n", &err), 0);
	ck_assert(c.jitq_speedup[0] == 0 && c.jitq_speedup[1] == 3 && c.jitq_speedup[2] == 4.5);
	config_init(&c);
	ck_assert_int_lt(parse(&c, "speedup_mx9 = 65\n", &err), 0);
	ck_assert_str_eq(err.msg, "test.conf:1: speedup_mx9 \"65\" must be at most 64");
}
END_TEST

static void expect(const char *text, const char *want)
{
	struct config c, before;
	struct pim_error err = { 0 };
	config_init(&c);
	before = c;
	ck_assert_int_lt(parse(&c, text, &err), 0);
	ck_assert_msg(strstr(err.msg, want) != NULL, "error \"%s\" lacks \"%s\"", err.msg, want);
	/* a failed parse leaves the configuration untouched */
	ck_assert_mem_eq(&c, &before, sizeof c);
}

START_TEST(errors_name_file_and_line)
{
	expect("socket = /a\nfrobnicate = 1\n", "test.conf:2: unknown key \"frobnicate\"");
	expect("max_clients = 4\nmax_clients = 5\n", "test.conf:2: key \"max_clients\" is set twice");
	expect("\n\nsocket /a\n", "test.conf:3: expected \"key = value\"");
	expect("max_frame_bytes = 12\n", "test.conf:1: max_frame_bytes \"12\" must be an integer");
	expect("max_frame_bytes = 1G\n", "between 4096 and 268435456");
	expect("max_clients = -1\n", "max_clients \"-1\"");
	expect("max_clients = 10x\n", "max_clients \"10x\"");
	expect("max_clients = 99999999999999999999999\n", "max_clients");
	expect("log_level = loud\n", "log_level \"loud\" is not one of");
	expect("socket = relative.sock\n", "socket must be an absolute path");
	expect("state_dir =\n", "key \"state_dir\" has no value");
	char longsock[200];
	snprintf(longsock, sizeof longsock, "socket = /%0150d\n", 0);
	expect(longsock, "socket is longer than 107 bytes");
	/* placement parameters: each value, then the set as a whole */
	expect("sigma = x\n", "test.conf:1: sigma \"x\" must be a finite number >= 0");
	expect("sigma = 2\n", "test.conf: invalid placement parameter sigma");
	expect("theta = 0\ntheta_ratio = 0\n", "theta_ratio");
	expect("n_core = inf\n", "n_core \"inf\" must be a finite number");
	/* profiling limits */
	expect("profile_concurrency = 0\n", "profile_concurrency \"0\" must be an integer");
	expect("profile_memory_bytes = 1K\n", "between 16777216 and");
	expect("pim_config = relative.conf\n", "pim_config must be an absolute path");
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	ck_assert_int_eq(config_parse(&c, "max_clients = 1\0\n", 17, "t", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "t:1: contains a NUL byte"), "%s", err.msg);
}
END_TEST

/* Who jobs may run as, and the profiler's shares */
START_TEST(profile_policy_keys)
{
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	ck_assert(!c.allow_root_jobs);
	ck_assert_str_eq(c.profile_group, "");
	ck_assert_uint_eq(c.profile_max_samples, 10000000);
	ck_assert_uint_eq(c.profile_queue_per_uid, 8);
	int r = parse(&c, "allow_root_jobs = yes\nprofile_group = pim\nprofile_max_samples = 1K\n"
			  "profile_queue_per_uid = 3\n", &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert(c.allow_root_jobs);
	ck_assert_str_eq(c.profile_group, "pim");
	ck_assert_uint_eq(c.profile_max_samples, 1024);
	ck_assert_uint_eq(c.profile_queue_per_uid, 3);
	ck_assert_int_eq(parse(&c, "allow_root_jobs = no\nprofile_group = 65534\n", &err), 0);
	ck_assert(!c.allow_root_jobs);
	ck_assert_str_eq(c.profile_group, "65534");
	expect("allow_root_jobs = maybe\n", "test.conf:1: allow_root_jobs \"maybe\" must be yes or no");
	expect("profile_group = a b\n", "profile_group \"a b\" is not a group name or number");
	expect("profile_group = -x\n", "profile_group \"-x\" is not a group name");
	expect("profile_max_samples = 0\n", "profile_max_samples \"0\" must be an integer");
	expect("profile_queue_per_uid = 5000\n", "between 1 and 4096");
}
END_TEST

START_TEST(containment_keys)
{
	struct config c;
	struct pim_error err = { 0 };
	config_init(&c);
	ck_assert_int_eq(c.job_cgroups, CGROUP_MODE_AUTO);
	ck_assert_uint_eq(c.profile_max_processes, 256);
	int r = parse(&c, "job_cgroups = yes\nprofile_max_processes = 4K\n", &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_int_eq(c.job_cgroups, CGROUP_MODE_YES);
	ck_assert_uint_eq(c.profile_max_processes, 4096);
	ck_assert_int_eq(parse(&c, "job_cgroups = no\n", &err), 0);
	ck_assert_int_eq(c.job_cgroups, CGROUP_MODE_NO);
	ck_assert_int_eq(parse(&c, "job_cgroups = auto\n", &err), 0);
	ck_assert_int_eq(c.job_cgroups, CGROUP_MODE_AUTO);
	expect("job_cgroups = maybe\n", "test.conf:1: job_cgroups \"maybe\" must be auto, yes or no");
	expect("profile_max_processes = 7\n", "between 8 and 4194304");
	expect("profile_max_processes = 4194305\n", "between 8 and 4194304");
}
END_TEST

START_TEST(files)
{
	struct config c;
	struct pim_error err = { 0 };
	char path[] = "/tmp/pimd-test-conf-XXXXXX";
	int fd = mkstemp(path);
	const char text[] = "max_clients = 3\n";

	config_init(&c);
	ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)sizeof text - 1);
	close(fd);
	ck_assert_int_eq(config_load(&c, path, false, &err), 0);
	ck_assert_uint_eq(c.max_clients, 3);
	unlink(path);
	/* absent: fine for the default path, an error when named explicitly */
	ck_assert_int_eq(config_load(&c, path, true, &err), 1);
	ck_assert_uint_eq(c.max_clients, 3); /* what was there stands */
	ck_assert_int_eq(config_load(&c, path, false, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, path) != NULL, "%s", err.msg);
	ck_assert_int_eq(config_load(&c, "/tmp", false, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = test_case(s, "config");
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, values_and_comments);
	tcase_add_test(tc, connection_limits);
	tcase_add_test(tc, catalogue_keys);
	tcase_add_test(tc, containment_keys);
	tcase_add_test(tc, errors_name_file_and_line);
	tcase_add_test(tc, profile_policy_keys);
	tcase_add_test(tc, files);
	return test_run_suite(s);
}
