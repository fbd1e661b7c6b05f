/* SPDX-License-Identifier: MIT */
/*
 * pimd: the per-host PIM placement and JIT-Q scheduling service.  See pimd(8).
 *
 * This file is the shell: options, configuration, signals, systemd notification and the
 * event loop.  The store, the transport and the request handlers live in their own modules.
 */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>

#include "catalogue.h"
#include "config.h"
#include "log.h"
#include "loop.h"
#include "pimsim.h"
#include "platform.h"
#include "priority.h"
#include "profile.h"
#include "server.h"
#include "store.h"

struct pimd {
	struct config cfg;
	const char *config_path;
	bool config_given;
	/* command-line values, which win over the file on every (re)load */
	const char *opt_socket, *opt_state_dir, *opt_log_level;
	bool foreground;
	struct loop *loop;
	struct store *store;
	struct server *server;
	struct platform platform;
	struct pimsim_params pim;
	struct profiler *profiler;
	struct catalogue *catalogue; /* NULL without a catalogue key */
	struct cgroup_tree *cgroup; /* a cgroup per profiling job; NULL: process groups */
	struct rpc_context ctx;
	struct watch sig, wd;
	char status[256];
	unsigned long loop_sql; /* statements the event loop ran, as last reported (store_guard_count) */
};

static void help(void)
{
	printf("Usage: pimd [OPTION]...\n"
	       "Per-host service that decides which loop nests run in processing-in-memory.\n\n"
	       "  -s, --socket PATH      listen on PATH (default %s); ignored when\n"
	       "                         systemd passes the socket\n"
	       "  -d, --state-dir DIR    keep the database in DIR/pimd.db (default %s)\n"
	       "  -c, --config FILE      read FILE (default %s; absent is fine unless given)\n"
	       "  -f, --foreground       do not detach (the default under systemd)\n"
	       "  -l, --log-level LEVEL  err, warning, notice, info (default) or debug\n"
	       "      --check-config     parse the configuration, print it and exit\n"
	       "  -h, --help             show this help\n"
	       "  -V, --version          show the version\n\n"
	       "Signals: SIGHUP reloads the configuration, SIGTERM and SIGINT stop pimd.\n"
	       "See pimd(8) and pimd.conf(5).\n",
	       CONFIG_DEFAULT_SOCKET, CONFIG_DEFAULT_STATE_DIR, CONFIG_DEFAULT_PATH);
}

/* The HBM-PIM parameters named by the configuration (built-in defaults when none). */
static int load_pim(const struct config *c, struct pimsim_params *p, struct pim_error *err)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len;
	int r;

	pimsim_params_default(p);
	if (!c->pim_config[0])
		return 0;
	if ((r = read_file(c->pim_config, PIMSIM_CONF_MAX, &buf, &len, err)) < 0)
		return r;
	return pimsim_params_parse(p, buf, len, c->pim_config, err);
}

/* Loads the file, then applies command-line overrides; on error cfg is unchanged. */
/* 0, or 1 when the (default) configuration file does not exist and the defaults apply. */
static int load_config(struct pimd *d, struct config *cfg, struct pim_error *err)
{
	struct config c;
	int r, absent;

	config_init(&c);
	absent = r = config_load(&c, d->config_path, !d->config_given, err);
	if (r < 0)
		return r;
	if (d->opt_socket) {
		if (strlen(d->opt_socket) >= sizeof c.socket_path)
			return err_set(err, -ENAMETOOLONG, "--socket: path longer than %zu bytes",
				       sizeof c.socket_path - 1);
		snprintf(c.socket_path, sizeof c.socket_path, "%s", d->opt_socket);
	}
	if (d->opt_state_dir) {
		if (strlen(d->opt_state_dir) >= sizeof c.state_dir)
			return err_set(err, -ENAMETOOLONG, "--state-dir: path too long");
		snprintf(c.state_dir, sizeof c.state_dir, "%s", d->opt_state_dir);
	}
	if (d->opt_log_level) {
		r = log_level_from_name(d->opt_log_level);
		if (r < 0)
			return err_set(err, -EINVAL, "--log-level: \"%s\" is not one of err, warning, notice, "
				       "info, debug", d->opt_log_level);
		c.log_level = r;
	}
	*cfg = c;
	return absent;
}

/* Descriptors pimd needs besides its clients: database, listener, epoll, signal and timer fds,
 * and per profiling worker its pipes and library. */
#define FD_MARGIN 64u
#define FD_PER_WORKER 8u

/*
 * Raises the soft RLIMIT_NOFILE to fit max_clients connections and the margin, up to the hard
 * limit (LimitNOFILE= in the unit); says so when the hard limit is lower, since accept() then
 * fails with EMFILE before max_clients is reached (the listener rests, see server.c).
 */
static void raise_fd_limit(const struct config *c)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)c->max_clients + FD_MARGIN + (rlim_t)c->profile_concurrency * FD_PER_WORKER;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rlim_t cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (cur > rl.rlim_cur) {
		rl.rlim_cur = cur;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			log_warning("Cannot raise RLIMIT_NOFILE to %llu: %s", (unsigned long long)cur,
				    strerror(errno));
			return;
		}
	}
	if (cur < want)
		log_warning("RLIMIT_NOFILE allows %llu descriptors, max_clients %u needs %llu; raise "
			    "LimitNOFILE= (or ulimit -Hn) or lower max_clients", (unsigned long long)cur,
			    c->max_clients, (unsigned long long)want);
	else
		log_debug("RLIMIT_NOFILE raised to %llu for max_clients %u", (unsigned long long)cur,
			  c->max_clients);
}

static void update_status(struct pimd *d)
{
	unsigned clients = server_clients(d->server), models = d->ctx.models;
	char buf[sizeof d->status];

	snprintf(buf, sizeof buf, "Serving %u client%s, %u model%s", clients, clients == 1 ? "" : "s",
		 models, models == 1 ? "" : "s");
	if (strcmp(buf, d->status) != 0) {
		memcpy(d->status, buf, sizeof buf);
		sd_notifyf(0, "STATUS=%s", buf);
	}
}

static void on_change(struct server *s, void *data)
{
	update_status(data);
}

/* The event loop ran SQL statements (store_guard_thread): a defect, said once per batch. */
static void report_loop_sql(struct pimd *d)
{
	const char *sql;
	unsigned long n = store_guard_count(&sql);

	if (n == d->loop_sql)
		return;
	log_error("pimd's event loop ran %lu SQL statement%s (%lu in all), the last: %s; the loop "
		  "never queries the store: a defect, please report it", n - d->loop_sql,
		  n - d->loop_sql == 1 ? "" : "s", n, sql);
	d->loop_sql = n;
}

/* After each batch of events: the changes the writer thread did not take (it was stopping, or
 * out of memory) are written here (store.h: store_write_via). */
static void settle_changes(void *data)
{
	struct pimd *d = data;
	unsigned n = store_write_settle(d->store);

	if (n)
		log_debug("Wrote %u change%s on the event loop that the writer thread did not take", n,
			  n == 1 ? "" : "s");
	report_loop_sql(d);
}

static void reload(struct pimd *d)
{
	struct pim_error err = { 0 };
	struct config c;
	struct pimsim_params pim;

	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, now_ns() / 1000);
	int absent = load_config(d, &c, &err);
	if (absent < 0 || load_pim(&c, &pim, &err) < 0) {
		log_error("Reload failed, keeping the current configuration: %s", err.msg);
	} else {
		if (strcmp(c.socket_path, d->cfg.socket_path) != 0 || strcmp(c.state_dir, d->cfg.state_dir) != 0)
			log_warning("socket and state_dir changes take effect only after a restart");
		if (c.job_cgroups != d->cfg.job_cgroups)
			log_warning("job_cgroups changes take effect only after a restart");
		if (strcmp(c.catalogue, d->cfg.catalogue) || strcmp(c.catalogue_host_id, d->cfg.catalogue_host_id) ||
		    strcmp(c.catalogue_platform, d->cfg.catalogue_platform) ||
		    c.catalogue_timeout_ms != d->cfg.catalogue_timeout_ms)
			log_warning("catalogue settings take effect only after a restart");
		log_set_level(c.log_level);
		raise_fd_limit(&c);
		server_apply_config(d->server, &c);
		store_set_busy_timeout(d->store, c.busy_timeout_ms);
		profiler_apply_config(d->profiler, &c);
		d->pim = pim;
		/* Keep the paths in use; they only change with a restart. */
		memcpy(c.socket_path, d->cfg.socket_path, sizeof c.socket_path);
		memcpy(c.state_dir, d->cfg.state_dir, sizeof c.state_dir);
		d->cfg = c;
		rpc_context_apply_config(&d->ctx, &d->cfg);
		if (absent)
			log_notice("Configuration reloaded: %s does not exist, the built-in defaults apply",
				   d->config_path);
		else
			log_notice("Configuration reloaded from %s", d->config_path);
	}
	sd_notify(0, "READY=1");
	d->status[0] = 0;
	update_status(d);
}

static void on_signal(struct watch *w, uint32_t events)
{
	struct pimd *d = w->data;
	struct signalfd_siginfo si;

	while (read(w->fd, &si, sizeof si) == sizeof si) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			log_info("Received %s, stopping", strsignal((int)si.ssi_signo));
			sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
			loop_quit(d->loop, 0);
			return;
		case SIGHUP:
			reload(d);
			break;
		case SIGCHLD:
			/* workers are reaped by the profiler (their pidfds); anything else a job
			 * made pimd's child is reaped here */
			profiler_reap_strays(d->profiler);
			break;
		}
	}
}

static void on_watchdog(struct watch *w, uint32_t events)
{
	uint64_t expirations;

	if (read(w->fd, &expirations, sizeof expirations) > 0)
		sd_notify(0, "WATCHDOG=1");
}

static int setup_signals(struct pimd *d)
{
	sigset_t mask;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	d->sig = (struct watch){ .fd = fd, .fn = on_signal, .data = d };
	return loop_add(d->loop, &d->sig, EPOLLIN);
}

/* WATCHDOG=1 at half the interval systemd asked for (sd_watchdog_enabled). */
static int setup_watchdog(struct pimd *d)
{
	uint64_t usec;
	int r = sd_watchdog_enabled(0, &usec);

	d->wd.fd = -1;
	if (r <= 0)
		return r;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint64_t half = usec / 2;
	struct itimerspec its = {
		.it_interval = { .tv_sec = (time_t)(half / 1000000), .tv_nsec = (long)(half % 1000000) * 1000 },
	};
	its.it_value = its.it_interval;
	if (timerfd_settime(fd, 0, &its, NULL) < 0) {
		close(fd);
		return -errno;
	}
	d->wd = (struct watch){ .fd = fd, .fn = on_watchdog, .data = d };
	log_debug("Watchdog enabled: pinging every %" PRIu64 " ms", half / 1000);
	return loop_add(d->loop, &d->wd, EPOLLIN);
}

static int absolute(const char *path, char *buf, size_t len)
{
	char cwd[PATH_MAX];
	if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "%s/%s", cwd, path) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* mkdir -p: parents 0755, the state directory itself 0750. */
static int ensure_state_dir(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	if (strlen(dir) >= sizeof path)
		return -ENAMETOOLONG;
	memcpy(path, dir, strlen(dir) + 1);
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(path, 0750) < 0 && errno != EEXIST)
		return -errno;
	if (stat(dir, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static bool under_systemd(void)
{
	return getenv("NOTIFY_SOCKET") || getenv("LISTEN_FDS") || getenv("INVOCATION_ID");
}

/* Classic detach, after everything that can fail has been set up and reported. */
static int detach(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -errno;
	if (chdir("/") < 0)
		return -errno;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	return 0;
}

/* The command line into d; -1 to go on, else the exit status. */
static int parse_args(struct pimd *d, int argc, char **argv, bool *check_only)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "s:d:c:fl:hV", opts, NULL)) != -1) {
		switch (c) {
		case 's': d->opt_socket = optarg; break;
		case 'd': d->opt_state_dir = optarg; break;
		case 'c': d->config_path = optarg; d->config_given = true; break;
		case 'f': d->foreground = true; break;
		case 'l':
			if (log_level_from_name(optarg) < 0) {
				fprintf(stderr, "pimd: --log-level: \"%s\" is not one of err, warning, notice, "
					"info, debug\nTry 'pimd --help'.\n", optarg);
				return 2;
			}
			d->opt_log_level = optarg;
			break;
		case 'C': *check_only = true; break;
		case 'h': help(); return 0;
		case 'V': printf("pimd %s\n", PIMD_VERSION); return 0;
		default:
			fprintf(stderr, "Try 'pimd --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pimd: unexpected argument '%s'\nTry 'pimd --help'.\n", argv[optind]);
		return 2;
	}
	return -1;
}

/* --check-config: the configuration as pimd would run with it. */
static void print_config(const struct config *c)
{
	printf("pim_config = %s\n", c->pim_config[0] ? c->pim_config : "(built-in HBM-PIM defaults)");
	printf("socket = %s\nstate_dir = %s\nlog_level = %s\nmax_frame_bytes = %u\n"
	       "max_clients = %u\nmax_pending_bytes = %" PRIu64 "\nmax_requests_in_flight = %u\n"
	       "max_clients_per_uid = %u\nhandshake_timeout_ms = %u\nidle_timeout_s = %u\n"
	       "max_buffered_bytes = %" PRIu64 "\n"
	       "busy_timeout_ms = %u\nprofile_concurrency = %u\nprofile_queue_max = %u\n"
	       "profile_repetitions = %u\nprofile_warmups = %u\nprofile_timeout_ms = %u\n"
	       "profile_cpu_seconds = %u\nprofile_memory_bytes = %" PRIu64 "\n",
	       c->socket_path, c->state_dir, log_level_name(c->log_level), c->max_frame_bytes,
	       c->max_clients, c->max_pending_bytes, c->max_requests_in_flight, c->max_clients_per_uid,
	       c->handshake_timeout_ms, c->idle_timeout_s, c->max_buffered_bytes, c->busy_timeout_ms,
	       c->profile_concurrency, c->profile_queue_max, c->profile_repetitions, c->profile_warmups,
	       c->profile_timeout_ms, c->profile_cpu_seconds, c->profile_memory_bytes);
	static const char *const modes[] = { [CGROUP_MODE_AUTO] = "auto", [CGROUP_MODE_YES] = "yes",
					     [CGROUP_MODE_NO] = "no" };
	printf("profile_max_samples = %u\nprofile_queue_per_uid = %u\nallow_root_jobs = %s\n"
	       "profile_group = %s\nprofile_max_processes = %u\njob_cgroups = %s\n",
	       c->profile_max_samples, c->profile_queue_per_uid, c->allow_root_jobs ? "yes" : "no",
	       c->profile_group[0] ? c->profile_group : "(the socket's group)",
	       c->profile_max_processes, modes[c->job_cgroups]);
	printf("catalogue = %s\ncatalogue_host_id = %s\ncatalogue_platform = %s\ncatalogue_timeout_ms = %u\n",
	       c->catalogue[0] ? c->catalogue : "(none: no fleet catalogue)",
	       c->catalogue_host_id[0] ? c->catalogue_host_id : "(/etc/machine-id)",
	       c->catalogue_platform[0] ? c->catalogue_platform : "(detected)", c->catalogue_timeout_ms);
	const struct placement_params *p = &c->placement;
	printf("n_core = %g\nf_pim = %g\ni_min = %g\nt_ctx = %g\nb_cpu = %g\ntheta = %g\n"
	       "theta_ratio = %g\nsigma = %g\nb_rd = %g\nb_wb = %g\nb_pim_core = %g\n"
	       "line_bytes = %g\n", p->n_core, p->f_pim, p->i_min, p->t_ctx, p->b_cpu, p->theta,
	       p->theta_ratio, p->sigma, p->b_rd, p->b_wb, p->b_pim_core, p->line_bytes);
}

/* The state directory and the store in it, at db_path. */
static int open_store(struct pimd *d, char *db_path, size_t len)
{
	struct pim_error err = { 0 };
	int r;

	if ((r = ensure_state_dir(d->cfg.state_dir)) < 0) {
		log_error("State directory %s: %s", d->cfg.state_dir, strerror(-r));
		return r;
	}
	/* The directory may be reached through a link (systemd's DynamicUser= makes one); the
	 * database is opened without following any (pimd(8), SECURITY). */
	char dir[PATH_MAX];
	if (!realpath(d->cfg.state_dir, dir)) {
		r = -errno;
		log_error("State directory %s: %s", d->cfg.state_dir, strerror(-r));
		return r;
	}
	snprintf(db_path, len, "%s/pimd.db", dir);
	if ((r = store_check_trust(dir, db_path, geteuid(), &err)) < 0) {
		log_error("Refusing the state directory: %s", err.msg);
		return r;
	}
	if ((r = store_open(db_path, d->cfg.busy_timeout_ms, &d->store, &err)) < 0) {
		log_error("Cannot open the store: %s", err.msg);
		return r;
	}
	if (!store_reserve_held(d->store))
		log_warning("No room for the %u MiB reserve beside %s: on a full file system models "
			    "may not be removable", STORE_RESERVE_BYTES >> 20, db_path);
	/* What an interrupted write or removal of a large model left: never visible, deleted now. */
	unsigned staged = 0;
	if (store_staged_cleanup(d->store, &staged, &err) < 0)
		log_warning("Cannot delete the rows of interrupted model writes in %s: %s (tried again at "
			    "the next start)", db_path, err.msg);
	else if (staged)
		log_info("Deleted the rows of %u model%s whose writing or removal was interrupted", staged,
			 staged == 1 ? "" : "s");
	return 0;
}

/*
 * Why B_cpu is to be measured at this start: NULL when the stored figure stands.  Measured
 * again when there is none (a new platform key: another CPU model or PMU), when the single
 * long pass of pimd before sql/0008 measured it (load could halve it), and when the host it was
 * measured on had other CPUs online or other memory.
 */
static const char *b_cpu_stale(const struct store_platform *stored, const char *host)
{
	if (stored->b_cpu <= 0)
		return "no B_cpu was measured on this platform";
	if (!stored->b_cpu_method[0])
		return "the stored B_cpu comes from the single-pass probe of an earlier pimd";
	if (strcmp(stored->b_cpu_host, host) != 0)
		return "the host changed since B_cpu was measured";
	return NULL;
}

/* This host as the store knows it, with its read bandwidth B_cpu (measured when it is not). */
static int detect_platform(struct pimd *d)
{
	struct pim_error err = { 0 };
	const char *why;
	char host[64];
	int r;

	platform_detect(&d->platform, &err);
	if ((r = store_platform_ensure(d->store, &d->platform.id, &d->platform.row, &err)) < 0) {
		log_error("Cannot record the platform: %s", err.msg);
		return r;
	}
	platform_host_describe(host, sizeof host);
	if ((why = b_cpu_stale(&d->platform.id, host))) {
		/* Before the event loop starts: every answer uses the measured figure. */
		struct store_platform m = d->platform.id;
		if (d->platform.id.b_cpu > 0)
			log_notice("Measuring B_cpu again: %s (stored: %.2f GB/s%s%s)", why,
				   d->platform.id.b_cpu / 1e9, d->platform.id.b_cpu_host[0] ? " on " : "",
				   d->platform.id.b_cpu_host);
		if (platform_probe_bandwidth(&m, NULL, &err) < 0) {
			log_warning("%s; %s", err.msg, d->platform.id.b_cpu > 0
				    ? "keeping the stored B_cpu" : "using the paper's B_cpu unless b_cpu is configured");
		} else {
			d->platform.id = m;
			if (store_platform_set_b_cpu(d->store, d->platform.row, &m, &err) < 0)
				log_warning("Cannot store the measured B_cpu: %s", err.msg);
			log_info("Measured host read bandwidth B_cpu = %.2f GB/s, spread %.1f%% (%s; %s; %s)",
				 m.b_cpu / 1e9, 100 * m.b_cpu_spread, m.b_cpu_method, m.b_cpu_host, m.b_cpu_load);
			if (m.b_cpu_busy)
				log_notice("The machine was busy while B_cpu was measured (%s); if answers "
					   "look off, measure again when it is quiet: pimctl platform probe",
					   m.b_cpu_load);
		}
	}
	/* the key under which this host publishes (none without a catalogue: nothing is queued) */
	if (d->cfg.catalogue[0])
		platform_fleet_describe(&d->platform, d->cfg.catalogue_platform);
	if (d->platform.counters)
		log_info("Platform %s: %s", d->platform.id.name, d->platform.backend_reason);
	else
		log_notice("Platform %s: %s", d->platform.id.name, d->platform.backend_reason);
	return 0;
}

/* The event loop, the profiler, the request context and the server; then detaches. Everything
 * that can fail is set up before detaching, so the starter's status is true. */
static int start(struct pimd *d)
{
	struct pim_error err = { 0 };
	int r;

	/* this thread runs the loop, and starts every other thread and process after this */
	priority_boost_loop();
	if ((r = loop_new(&d->loop)) < 0) {
		log_error("epoll: %s", strerror(-r));
		return r;
	}
	/* pimd(8), Containment: a cgroup per job in a delegated subtree, else process groups */
	char why[512], what[640];
	if ((r = cgroup_tree_open(d->cfg.job_cgroups, &d->cgroup, why, sizeof why, &err)) < 0) {
		log_error("job_cgroups = yes, but %s", err.msg);
		return r;
	}
	if (d->cgroup)
		cgroup_tree_describe(d->cgroup, what, sizeof what);
	else
		snprintf(what, sizeof what, "a process group per job (seccomp keeps the model from "
			 "setsid and setpgid) and RLIMIT_NPROC; no cgroup: %s", why);
	log_info("Profiling jobs are contained by %s", what);
	if ((r = profiler_new(d->loop, d->store, &d->platform, &d->cfg, &d->profiler, &err)) < 0) {
		log_error("Cannot set up profiling: %s", err.msg);
		return r;
	}
	profiler_set_containment(d->profiler, d->cgroup, what);
	rpc_context_init(&d->ctx, d->store, &d->platform, &d->cfg, &d->pim, d->profiler);
	if ((r = server_new(d->loop, &d->cfg, &d->ctx, &d->server, &err)) < 0) {
		log_error("Cannot listen: %s", err.msg);
		return r;
	}
	/* What the profiler and the handlers store on their own goes to the writer thread. */
	d->ctx.writer = server_writer(d->server);
	profiler_set_writer(d->profiler, &d->ctx.writer);
	if ((r = catalogue_check_config(&d->cfg, &err)) < 0) {
		log_error("%s", err.msg);
		return r;
	}
	if (!d->foreground && (r = detach()) < 0) {
		log_error("Cannot detach: %s", strerror(-r));
		return r;
	}
	d->ctx.pid = (uint32_t)getpid(); /* (the daemon's, once detached) */
	/* After detaching: epoll reports a signalfd's signals only to the process that created it. */
	if ((r = setup_signals(d)) < 0) {
		log_error("signals: %s", strerror(-r));
		return r;
	}
	if ((r = setup_watchdog(d)) < 0)
		log_warning("Watchdog not armed: %s", strerror(-r));
	/* After detaching: its thread would not survive the fork.  The connection string was
	 * checked by config_parse before. */
	if (d->cfg.catalogue[0]) {
		if ((r = catalogue_new(&d->cfg, &d->platform, d->store, &d->catalogue, &err)) < 0) {
			log_error("Cannot set up the fleet catalogue: %s", err.msg);
			return r;
		}
		d->ctx.catalogue = d->catalogue;
	}
	server_set_change_hook(d->server, on_change, d);
	loop_set_after(d->loop, settle_changes, d);
	return 0;
}

/* Blocks from this size on are mapped on their own (glibc's initial threshold, kept fixed). */
#define PIMD_MMAP_THRESHOLD (128 * 1024)
#define PIMD_TRIM_THRESHOLD (16 * 1024 * 1024)

int main(int argc, char **argv)
{
	struct pimd d = { .config_path = CONFIG_DEFAULT_PATH };
	struct pim_error err = { 0 };
	bool check_only = false;
	char db_path[PATH_MAX + 16];
	int r;

	/* Frames, replies and the arrays of a large model's work come from the kernel and go back
	 * to it when freed: glibc would otherwise raise its mmap threshold after the first such
	 * block and keep the next ones in the heap, so that pimd stays as large as its largest job
	 * (the heap's small blocks are returned by malloc_trim after each large job, server.c). */
	mallopt(M_MMAP_THRESHOLD, PIMD_MMAP_THRESHOLD);
	/* Fixing the mmap threshold leaves glibc's trim threshold at 128 KiB: every free() above it
	 * would hand the top of a thread's heap back with madvise, and SQLite frees a page cache of
	 * that size each time a statement's ephemeral table closes (storing a region's metrics does
	 * twice), so deriving the metrics of a million regions spent most of its time in madvise. */
	mallopt(M_TRIM_THRESHOLD, PIMD_TRIM_THRESHOLD);
	if ((r = parse_args(&d, argc, argv, &check_only)) >= 0)
		return r;
	/* Relative paths on the command line are taken from here, as the user means them (pimd
	 * changes to / when it detaches; pimd.conf requires absolute paths). */
	char abs_socket[PATH_MAX], abs_state[PATH_MAX];
	if (d.opt_socket && absolute(d.opt_socket, abs_socket, sizeof abs_socket) == 0)
		d.opt_socket = abs_socket;
	if (d.opt_state_dir && absolute(d.opt_state_dir, abs_state, sizeof abs_state) == 0)
		d.opt_state_dir = abs_state;
	if (load_config(&d, &d.cfg, &err) < 0) {
		log_error("%s", err.msg);
		return 1;
	}
	log_set_level(d.cfg.log_level);
	if (load_pim(&d.cfg, &d.pim, &err) < 0) {
		log_error("%s", err.msg);
		return 1;
	}
	if (check_only) {
		if (catalogue_check_config(&d.cfg, &err) < 0) {
			log_error("%s", err.msg);
			return 1;
		}
		print_config(&d.cfg);
		return 0;
	}
	if (under_systemd())
		d.foreground = true;
	if (open_store(&d, db_path, sizeof db_path) < 0 || detect_platform(&d) < 0)
		return 1;
	raise_fd_limit(&d.cfg);
	if (start(&d) < 0)
		return 1;
	log_info("pimd %s ready: socket %s%s, database %s (schema %u)", PIMD_VERSION,
		 server_socket_activated(d.server) ? "from systemd" : d.cfg.socket_path,
		 "", db_path, store_schema_version(d.store));
	sd_notify(0, "READY=1");
	update_status(&d);

	/* From here the event loop never queries the store: the guard counts what it does. */
	store_guard_thread(true);
	r = loop_run(d.loop);
	store_guard_thread(false);
	report_loop_sql(&d);

	/* Connections first: closing one finishes its in-situ run through the profiler.  The
	 * writer writes what it was given before it stops; the profiler writes the rest itself. */
	profiler_stop(d.profiler);
	server_free(d.server);
	rpc_context_release(&d.ctx);
	catalogue_free(d.catalogue);
	profiler_set_writer(d.profiler, NULL);
	profiler_free(d.profiler);
	unsigned left = cgroup_tree_free(d.cgroup, 2000);
	if (left)
		log_warning("%u job cgroups still had processes 2 s after they were killed; the next "
			    "start removes them", left);
	store_close(d.store);
	if (d.wd.fd >= 0)
		close(d.wd.fd);
	close(d.sig.fd);
	loop_free(d.loop);
	if (r < 0) {
		log_error("Event loop failed: %s", strerror(-r));
		return 1;
	}
	log_info("pimd stopped");
	return 0;
}
