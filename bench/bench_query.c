/* SPDX-License-Identifier: MIT */
/*
 * bench_query: round-trip cost of a pimd query (Status through libpimclient over the Unix
 * socket), compared side by side with a bare echo server that uses the same socket type, the
 * same framing (frame.h) and the same single-threaded epoll loop shape as pimd at the same nice
 * value as pimd's event loop, and answers with frames of exactly the sizes of a real Status
 * request and response.
 *
 *   bench_query [PIMD_PATH (default build/pimd)] [--quick] [--mixed | --status]
 *
 * In one run it:
 *   1. starts a private pimd (temporary socket, state dir and empty configuration);
 *   2. measures the packed sizes of a Status request and its response with raw frames, and
 *      starts the echo server (forked child) that answers every frame with a payload of the
 *      response's size;
 *   3. latency: pim_status() and raw echo round trips in alternating batches (the order
 *      alternates every round, so drift and noise from other users of the machine hit both
 *      alike), the client and each server's serving thread on one CPU meanwhile (pin());
 *      p50/p99 of per-request CLOCK_MONOTONIC timings and the ratio pimd/echo, against
 *      the goals p50 <= 1.2x and p99 <= 1.5x;
 *   4. throughput: 8 client processes, each connected to pimd and to the echo server, ask as
 *      fast as they can for 8 rounds of 0.5 s a server; the servers take turns in slots of
 *      50 ms (pimd, echo, echo, pimd, then again: every client on the same server in a slot), so
 *      that what the machine does over a few tenths of a second (other guests, the hypervisor's
 *      steal) falls on both alike; each round's ratio is printed; goal pimd >= 0.95x echo; with
 *      the CPU each side spent on a request (the server's from /proc, in clock ticks; the
 *      clients' from getrusage at each change of slot), user and system apart;
 *   5. the mixed workload of a shared service: 64 client processes cycling through status, list,
 *      show, placement and decisions of a 30-region model, a JIT-Q plan and loading and removing
 *      a model of their own; requests/s, p50 and p99 overall (goal p99 <= 20 ms), of the reads
 *      among them (all but load and remove: goal p99 <= 10 ms) and per kind, and the share of a
 *      core pimd used; then the same with status in place of load and remove, whose commits wait
 *      for the disk;
 *   6. each goal again, one line each, met or missed, with the share of the CPU time the
 *      hypervisor took meanwhile where it took 1% or more (a phase it took much of measures the
 *      host as much as pimd);
 *   7. stops everything and removes the temporary directory.
 *
 * Exit status: 0 on success (whether or not the goal is met), 1 if something failed, 2 on a
 * usage error.  --quick runs far fewer iterations (a smoke test of well under 3 s); --mixed
 * runs only the mixed workload (5), --status only the Status latency and throughput (3, 4).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "pim.h"
#include "pim.pb-c.h"

#define N_CLIENTS 8
#define MAX_FRAME FRAME_MAX_DEFAULT

enum kind { K_PIMD, K_ECHO };
static const char *const kind_name[] = { "pimd status", "raw echo" };

struct params {
	unsigned rounds, batch, warmup;   /* latency */
	unsigned tput_rounds;             /* throughput rounds, at most TPUT_MAX_ROUNDS */
	uint64_t tput_ns;                 /* a round's time with each server: whole slots (TPUT_SLOT_NS) */
	uint64_t mix_ns;                  /* duration of the mixed workload */
};

static const struct params normal_params = { 20, 2000, 1000, 8, 500000000ull, 4000000000ull };
static const struct params quick_params = { 4, 250, 100, 1, 200000000ull, 500000000ull };

/* Global so the signal handler and cleanup can reach them. */
static char tmp_dir[64];
static char pimd_sock[128], echo_sock[128], state_dir[128], conf_path[128];
static pid_t pimd_pid = -1, echo_pid = -1, main_pid;

/* Sizes measured on a real Status round trip (payload bytes, without the frame header). */
static uint32_t req_size, resp_size;
static uint8_t *req_payload;  /* a packed Status request of req_size bytes */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
	va_list ap;
	fputs("bench_query: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ cleanup */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "bench_query: removing %s: %s\n", path, strerror(errno));
	return 0;
}

static pid_t reap(pid_t pid, unsigned timeout_ms, int *status)
{
	for (unsigned waited = 0;; waited += 5) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r != 0 || waited >= timeout_ms)
			return r;
		sleep_ms(5);
	}
}

/* Returns 0 if pimd stopped cleanly on SIGTERM. */
static int cleanup(void)
{
	int ret = 0, st;

	if (echo_pid > 0) {
		kill(echo_pid, SIGKILL);
		waitpid(echo_pid, NULL, 0);
		echo_pid = -1;
	}
	if (pimd_pid > 0) {
		kill(pimd_pid, SIGTERM);
		pid_t r = reap(pimd_pid, 5000, &st);
		if (r == 0) {
			ret = fail("pimd did not stop within 5 s of SIGTERM; killing it");
			kill(pimd_pid, SIGKILL);
			waitpid(pimd_pid, NULL, 0);
		} else if (r > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			ret = WIFEXITED(st) ? fail("pimd exited with status %d on SIGTERM", WEXITSTATUS(st))
					    : fail("pimd died of signal %d", WTERMSIG(st));
		}
		pimd_pid = -1;
	}
	if (tmp_dir[0]) {
		nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		tmp_dir[0] = 0;
	}
	return ret;
}

/* Interrupted: stop the children and remove what we know of with async-signal-safe calls. */
static void on_signal(int sig)
{
	static const char *const db_files[] = { "pimd.db", "pimd.db-wal", "pimd.db-shm",
						"pimd.db-journal" };
	char p[256];

	if (getpid() != main_pid)
		_exit(128 + sig);
	if (echo_pid > 0) {
		kill(echo_pid, SIGKILL);
		waitpid(echo_pid, NULL, 0);
	}
	if (pimd_pid > 0) {
		kill(pimd_pid, SIGTERM);
		waitpid(pimd_pid, NULL, 0);
	}
	if (tmp_dir[0]) {
		for (size_t i = 0; i < sizeof db_files / sizeof db_files[0]; i++) {
			size_t a = strlen(state_dir), b = strlen(db_files[i]);
			if (a + b + 2 > sizeof p)
				continue;
			memcpy(p, state_dir, a);
			p[a] = '/';
			memcpy(p + a + 1, db_files[i], b + 1);
			unlink(p);
		}
		rmdir(state_dir);
		unlink(pimd_sock);
		unlink(echo_sock);
		unlink(conf_path);
		rmdir(tmp_dir);
	}
	_exit(128 + sig);
}

/* ------------------------------------------------------------------ sockets */

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* One raw round trip; returns the response payload (caller frees) or NULL. */
static Pim__Response *raw_call(int fd, Pim__Request *req, size_t *req_len, uint32_t *resp_len)
{
	size_t n = pim__request__get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1), *rbuf;
	int r;

	if (!buf)
		return NULL;
	pim__request__pack(req, buf);
	r = frame_send(fd, buf, (uint32_t)n);
	free(buf);
	if (r < 0 || (r = frame_recv_wait(fd, MAX_FRAME, -1, &rbuf, resp_len)) < 0) {
		fail("raw round trip with pimd: %s", strerror(-r));
		return NULL;
	}
	Pim__Response *resp = pim__response__unpack(NULL, *resp_len, rbuf);
	free(rbuf);
	if (!resp)
		fail("pimd sent a response that does not decode");
	*req_len = n;
	return resp;
}

/*
 * Sizes of a real Status exchange, with raw frames.  The request id is that of a request in
 * the middle of the latency run (ids are varints, so their size depends on the value).
 */
static int probe_sizes(uint64_t typical_id)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Hello hello = PIM__HELLO__INIT;
	Pim__StatusRequest status = PIM__STATUS_REQUEST__INIT;
	Pim__Response *resp;
	size_t qlen;
	uint32_t rlen;
	int fd = unix_connect(pimd_sock);

	if (fd < 0)
		return fail("connecting to %s: %s", pimd_sock, strerror(-fd));
	hello.protocol_version = PIM_PROTOCOL_VERSION;
	hello.client_name = (char *)"bench_query-probe";
	req.id = 1;
	req.body_case = PIM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	resp = raw_call(fd, &req, &qlen, &rlen);
	if (!resp || resp->body_case != PIM__RESPONSE__BODY_HELLO) {
		if (resp)
			pim__response__free_unpacked(resp, NULL);
		close(fd);
		return fail("pimd did not answer Hello with a HelloReply");
	}
	pim__response__free_unpacked(resp, NULL);

	req.id = typical_id;
	req.body_case = PIM__REQUEST__BODY_STATUS;
	req.status = &status;
	resp = raw_call(fd, &req, &qlen, &rlen);
	close(fd);
	if (!resp || resp->body_case != PIM__RESPONSE__BODY_STATUS) {
		if (resp)
			pim__response__free_unpacked(resp, NULL);
		return fail("pimd did not answer Status with a StatusReply");
	}
	pim__response__free_unpacked(resp, NULL);
	req_size = (uint32_t)qlen;
	resp_size = rlen;
	req_payload = malloc(req_size ? req_size : 1);
	if (!req_payload)
		return fail("out of memory");
	pim__request__pack(&req, req_payload);
	return 0;
}

/* ------------------------------------------------------------------ pimd */

static int start_pimd(const char *path)
{
	int fd = open(conf_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return fail("creating %s: %s", conf_path, strerror(errno));
	/* defaults, independent of /etc/pimd, except room for the mixed workload's clients and the
	 * connections a closing client leaves behind for a moment */
	static const char conf[] = "max_clients_per_uid = 128\n";
	ssize_t w = write(fd, conf, sizeof conf - 1);
	close(fd);
	if (w != (ssize_t)sizeof conf - 1)
		return fail("writing %s: %s", conf_path, strerror(errno));
	if (access(path, X_OK) < 0)
		return fail("%s: %s (build it with make, or pass the path of pimd)", path,
			    strerror(errno));

	pid_t pid = fork();
	if (pid < 0)
		return fail("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != main_pid)
			_exit(127);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("WATCHDOG_USEC");
		execl(path, path, "--foreground", "--config", conf_path, "--socket", pimd_sock,
		      "--state-dir", state_dir, "--log-level", "warning", (char *)NULL);
		fprintf(stderr, "bench_query: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	pimd_pid = pid;

	/* Wait until it answers a Status. */
	/* the first start measures B_cpu (PLATFORM_PROBE_BYTES): slow on a loaded machine */
	uint64_t deadline = now_ns() + 60000000000ull;
	for (;;) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			pimd_pid = -1;
			return WIFEXITED(st) ? fail("pimd exited with status %d at start", WEXITSTATUS(st))
					     : fail("pimd died of signal %d at start", WTERMSIG(st));
		}
		pim_client *c = pim_client_new();
		struct pim_status s;
		if (!c)
			return fail("out of memory");
		int r = pim_client_connect(c, pimd_sock, "bench_query-wait");
		if (r == 0)
			r = pim_status(c, &s);
		if (r == 0) {
			pim_client_free(c);
			return 0;
		}
		if (now_ns() > deadline) {
			fail("pimd does not answer on %s after 60 s: %s", pimd_sock, pim_client_error(c));
			pim_client_free(c);
			return -1;
		}
		pim_client_free(c);
		sleep_ms(5);
	}
}

/* ------------------------------------------------------------------ echo server */

struct echo_conn {
	int fd;
	struct frame_reader rd;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	uint32_t events;
};

static void echo_conn_free(int ep, struct echo_conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	frame_reader_reset(&c->rd);
	free(c->out);
	free(c);
}

/* Queues a frame of resp_size bytes: the request's bytes, padded (or cut) to that size. */
static int echo_queue(struct echo_conn *c, const uint8_t *p, uint32_t len)
{
	size_t need = FRAME_HEADER_BYTES + resp_size;

	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + need)
			cap *= 2;
		uint8_t *d = realloc(c->out, cap);
		if (!d)
			return -ENOMEM;
		c->out = d;
		c->out_cap = cap;
	}
	uint8_t *w = c->out + c->out_len;
	frame_put_header(w, resp_size);
	w += FRAME_HEADER_BYTES;
	uint32_t k = len < resp_size ? len : resp_size;
	memcpy(w, p, k);
	memset(w + k, 0x5a, resp_size - k);
	c->out_len += need;
	return 0;
}

static int echo_flush(struct echo_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

static void echo_set_events(int ep, struct echo_conn *c)
{
	uint32_t ev = c->out_off < c->out_len ? EPOLLIN | EPOLLOUT : EPOLLIN;
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };
		c->events = ev;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
	}
}

/* The event loop of the echo child: the same shape as pimd's (one thread, epoll, frames read
 * with frame_reader, at most 32 frames per wakeup, answers sent with one non-blocking send). */
static __attribute__((noreturn)) void echo_serve(int lfd)
{
	struct epoll_event evs[64], e = { .events = EPOLLIN, .data.ptr = NULL };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) < 0)
		_exit(1);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (int i = 0; i < n; i++) {
			struct echo_conn *c = evs[i].data.ptr;
			if (!c) {
				int fd;
				while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					c = calloc(1, sizeof *c);
					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					c->events = EPOLLIN;
					frame_reader_init(&c->rd, MAX_FRAME);
					struct epoll_event ce = { .events = EPOLLIN, .data.ptr = c };
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce) < 0) {
						close(fd);
						free(c);
					}
				}
				continue;
			}
			if ((evs[i].events & EPOLLOUT) && echo_flush(c) < 0) {
				echo_conn_free(ep, c);
				continue;
			}
			bool drop = false;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				for (int k = 0; k < 32; k++) {
					int r = frame_reader_read(&c->rd, c->fd);
					if (r == 0)
						break;
					if (r < 0) {
						drop = true;
						break;
					}
					uint32_t len;
					uint8_t *p = frame_reader_take(&c->rd, &len, NULL);
					r = echo_queue(c, p, len);
					free(p);
					if (r < 0) {
						drop = true;
						break;
					}
				}
				if (!drop && echo_flush(c) < 0)
					drop = true;
			}
			if (drop) {
				echo_conn_free(ep, c);
				continue;
			}
			echo_set_events(ep, c);
		}
	}
}

static int start_echo(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (lfd < 0)
		return fail("socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", echo_sock);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 128) < 0) {
		fail("echo server on %s: %s", echo_sock, strerror(errno));
		close(lfd);
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(lfd);
		return fail("fork: %s", strerror(errno));
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != main_pid)
			_exit(1);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		echo_serve(lfd);
	}
	close(lfd);
	echo_pid = pid;
	/* at the nice value of pimd's event loop (its main thread), which pimd lowers where it may
	 * (priority.h): the two loops are compared at the same priority against the same clients */
	errno = 0;
	int loop_nice = getpriority(PRIO_PROCESS, (id_t)pimd_pid);
	if (errno)
		return fail("the nice value of pimd's event loop: %s", strerror(errno));
	if (setpriority(PRIO_PROCESS, (id_t)pid, loop_nice) < 0)
		return fail("the echo server at nice %d, as pimd's event loop: %s", loop_nice, strerror(errno));
	printf("echo server at nice %d, as pimd's event loop\n", loop_nice);
	return 0;
}

/* ------------------------------------------------------------------ clients */

struct client {
	enum kind kind;
	pim_client *pc;  /* K_PIMD */
	int fd;          /* K_ECHO */
};

static int client_open(struct client *c, enum kind kind)
{
	c->kind = kind;
	c->pc = NULL;
	c->fd = -1;
	if (kind == K_PIMD) {
		c->pc = pim_client_new();
		if (!c->pc)
			return fail("out of memory");
		int r = pim_client_connect(c->pc, pimd_sock, "bench_query");
		if (r < 0)
			return fail("%s", pim_client_error(c->pc));
		return 0;
	}
	c->fd = unix_connect(echo_sock);
	if (c->fd < 0)
		return fail("connecting to the echo server at %s: %s", echo_sock, strerror(-c->fd));
	return 0;
}

static void client_close(struct client *c)
{
	pim_client_free(c->pc);
	c->pc = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* One request and its answer. */
static inline int client_query(struct client *c)
{
	if (c->kind == K_PIMD) {
		struct pim_status st;
		int r = pim_status(c->pc, &st);
		if (r < 0)
			return fail("pim_status: %s", pim_client_error(c->pc));
		return 0;
	}
	uint8_t *p;
	uint32_t len;
	int r = frame_send(c->fd, req_payload, req_size);
	if (r == 0)
		r = frame_recv_wait(c->fd, MAX_FRAME, -1, &p, &len); /* as libpimclient waits */
	if (r < 0)
		return fail("echo round trip: %s", strerror(-r));
	free(p);
	if (len != resp_size)
		return fail("echo server answered %u bytes instead of %u", len, resp_size);
	return 0;
}

/* ------------------------------------------------------------------ latency */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static int run_batch(struct client *c, uint64_t *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		if (client_query(c) < 0)
			return -1;
		uint64_t t1 = now_ns();
		if (out)
			out[i] = t1 - t0;
	}
	return 0;
}

struct lat_result {
	uint64_t p50[2], p99[2], mean[2];
	double round_ratio_med, round_ratio_min, round_ratio_max;
};

/*
 * The latency client and each server's serving thread (pimd's event loop is its main thread,
 * the echo server has one) on one CPU while latency is measured: where the scheduler wakes a
 * server is otherwise its choice, and a wakeup on another CPU costs tens of microseconds on a
 * VM (the echo server once measured ten times slower than pimd for that alone).
 */
struct pinning {
	pid_t who[3];
	cpu_set_t old[3];
	bool saved[3];
	int cpu;
};

static void unpin(struct pinning *p)
{
	for (int i = 2; i >= 0; i--)
		if (p->saved[i])
			sched_setaffinity(p->who[i], sizeof p->old[i], &p->old[i]);
}

static int pin(struct pinning *p)
{
	*p = (struct pinning){ .who = { 0, pimd_pid, echo_pid }, .cpu = sched_getcpu() };
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(p->cpu, &one);
	for (int i = 0; i < 3; i++) {
		if (sched_getaffinity(p->who[i], sizeof p->old[i], &p->old[i]) < 0 ||
		    sched_setaffinity(p->who[i], sizeof one, &one) < 0) {
			int e = errno;
			unpin(p);
			return fail("pinning %s to CPU %d: %s", i == 0 ? "the client" : i == 1 ? "pimd" : "the echo server",
				    p->cpu, strerror(e));
		}
		p->saved[i] = true;
	}
	return 0;
}

static int measure_latency(const struct params *pp, struct lat_result *res)
{
	struct client cl[2];
	size_t total = (size_t)pp->rounds * pp->batch;
	uint64_t *t[2] = { calloc(total, sizeof(uint64_t)), calloc(total, sizeof(uint64_t)) };
	uint64_t *tmp = calloc(pp->batch, sizeof(uint64_t));
	double *ratio = calloc(pp->rounds, sizeof(double));
	int ret = -1;

	memset(cl, 0, sizeof cl);
	cl[0].fd = cl[1].fd = -1;
	if (!t[0] || !t[1] || !tmp || !ratio) {
		fail("out of memory");
		goto out;
	}
	struct pinning pinned;
	if (pin(&pinned) < 0)
		goto out;
	printf("  the client and both servers' serving threads on CPU %d\n", pinned.cpu);
	fflush(stdout);
	if (client_open(&cl[K_PIMD], K_PIMD) < 0 || client_open(&cl[K_ECHO], K_ECHO) < 0)
		goto out_pinned;
	if (run_batch(&cl[K_PIMD], NULL, pp->warmup) < 0 || run_batch(&cl[K_ECHO], NULL, pp->warmup) < 0)
		goto out_pinned;
	for (unsigned r = 0; r < pp->rounds; r++) {
		uint64_t p50r[2];
		for (int j = 0; j < 2; j++) {
			enum kind k = (enum kind)((r + (unsigned)j) % 2);  /* pimd first in even rounds */
			uint64_t *dst = t[k] + (size_t)r * pp->batch;
			if (run_batch(&cl[k], dst, pp->batch) < 0)
				goto out_pinned;
			memcpy(tmp, dst, pp->batch * sizeof(uint64_t));
			qsort(tmp, pp->batch, sizeof(uint64_t), cmp_u64);
			p50r[k] = pct(tmp, pp->batch, 0.50);
		}
		ratio[r] = (double)p50r[K_PIMD] / (double)(p50r[K_ECHO] ? p50r[K_ECHO] : 1);
	}
	for (int k = 0; k < 2; k++) {
		uint64_t sum = 0;
		for (size_t i = 0; i < total; i++)
			sum += t[k][i];
		qsort(t[k], total, sizeof(uint64_t), cmp_u64);
		res->p50[k] = pct(t[k], total, 0.50);
		res->p99[k] = pct(t[k], total, 0.99);
		res->mean[k] = sum / total;
	}
	ret = 0;
out_pinned:
	unpin(&pinned);
out:
	client_close(&cl[0]);
	client_close(&cl[1]);
	if (ret == 0) {
		/* Sort the per-round ratios (insertion sort: a few dozen values). */
		for (unsigned i = 1; i < pp->rounds; i++)
			for (unsigned j = i; j > 0 && ratio[j - 1] > ratio[j]; j--) {
				double x = ratio[j];
				ratio[j] = ratio[j - 1];
				ratio[j - 1] = x;
			}
		res->round_ratio_min = ratio[0];
		res->round_ratio_max = ratio[pp->rounds - 1];
		res->round_ratio_med = pp->rounds % 2 ? ratio[pp->rounds / 2]
						      : (ratio[pp->rounds / 2 - 1] + ratio[pp->rounds / 2]) / 2;
	}
	free(t[0]);
	free(t[1]);
	free(tmp);
	free(ratio);
	return ret;
}

/* ------------------------------------------------------------------ throughput */

/* A throughput client's report: per round and per server, the requests it began and the CPU
 * time it spent while that server's slots ran. */
#define TPUT_MAX_ROUNDS 16
struct tput_msg {
	uint64_t count[TPUT_MAX_ROUNDS][2];
	uint64_t user_ns[2], sys_ns[2];
	int32_t ok;
	int32_t pad;
};

/* This process's CPU time so far, user and system, in ns. */
static void self_cpu_ns(uint64_t *user, uint64_t *sys)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*user = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
	*sys = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
}

/*
 * A crowd of client processes released at once: start(i) runs in child i (and must not return)
 * with the write end of the ready pipe, to write one byte when connected, and the read end of
 * the start pipe, which reads EOF when all may go; keep_w, when >= 0, is a pipe's write end the
 * children keep (its read end keep_r is closed in them).  Returns the number of children started,
 * all of them released, their pids in pids.
 */
struct crowd {
	void (*start)(int i, void *arg, int ready_w, int start_r);
	void *arg;
	int keep_r;
	uint64_t released_ns; /* set by crowd_run(): when the children were let go */
	uint64_t *release_at; /* when not NULL (shared with the children): released_ns, for them */
};

static int crowd_run(struct crowd *cw, int n, pid_t *pids)
{
	int ready[2], start[2], k = 0;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return fail("pipe: %s", strerror(errno));
	if (pipe2(start, O_CLOEXEC) < 0) {
		close(ready[0]), close(ready[1]);
		return fail("pipe: %s", strerror(errno));
	}
	fflush(stdout);
	for (; k < n; k++) {
		pid_t pid = fork();
		if (pid < 0) {
			fail("fork: %s", strerror(errno));
			break;
		}
		if (pid == 0) {
			close(ready[0]);
			close(start[1]);
			if (cw->keep_r >= 0)
				close(cw->keep_r);
			cw->start(k, cw->arg, ready[1], start[0]);
			_exit(1);
		}
		pids[k] = pid;
	}
	close(ready[1]);
	close(start[0]);
	/* Wait until every child is connected (or gone), then release them all at once. */
	for (int got = 0; got < k;) {
		char b[64];
		ssize_t r = read(ready[0], b, sizeof b);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (int)r;
	}
	cw->released_ns = now_ns();
	if (cw->release_at)
		__atomic_store_n(cw->release_at, cw->released_ns, __ATOMIC_RELEASE);
	close(start[1]);
	close(ready[0]);
	return k;
}

/* Reaps the crowd; -1 if a child failed. */
static int crowd_wait(const pid_t *pids, int n)
{
	int ret = 0;

	for (int i = 0; i < n; i++) {
		int st;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			ret = -1;
	}
	return ret;
}

/*
 * The throughput runs in slots of TPUT_SLOT_NS, from the moment the clients are let go: every
 * client asks pimd in one slot and the echo server in the next, in the order pimd, echo, echo,
 * pimd (then again), so that the two servers take turns many times a second and a drift of the
 * machine over a few slots falls on both alike.  A request belongs to the slot it began in.
 */
#define TPUT_SLOT_NS 50000000ull

static enum kind slot_kind(uint64_t slot)
{
	return (enum kind)((slot ^ (slot >> 1)) & 1);
}

struct tput_arg {
	int res_w;
	unsigned rounds, slots_per_round;
	const uint64_t *release_at; /* shared: when the crowd was let go */
};

static __attribute__((noreturn)) void tput_child(const struct tput_arg *a, int ready_w, int start_r)
{
	struct tput_msg m = { 0 };
	struct client c[2];
	uint64_t slots = (uint64_t)a->rounds * a->slots_per_round, u0, s0, u1, s1;
	char b = 1;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (client_open(&c[K_PIMD], K_PIMD) < 0 || client_open(&c[K_ECHO], K_ECHO) < 0) {
		if (write(a->res_w, &m, sizeof m) < 0)
			_exit(1);
		_exit(1);
	}
	if (write(ready_w, &b, 1) != 1)
		_exit(1);
	while (read(start_r, &b, 1) < 0 && errno == EINTR)  /* EOF: go */
		;
	uint64_t t0 = __atomic_load_n(a->release_at, __ATOMIC_ACQUIRE), slot = 0, at;
	self_cpu_ns(&u0, &s0);
	m.ok = 1;
	while ((at = (now_ns() - t0) / TPUT_SLOT_NS) < slots) {
		if (at != slot) { /* the CPU time so far goes to the slot that ended */
			self_cpu_ns(&u1, &s1);
			m.user_ns[slot_kind(slot)] += u1 - u0;
			m.sys_ns[slot_kind(slot)] += s1 - s0;
			u0 = u1, s0 = s1, slot = at;
		}
		enum kind k = slot_kind(slot);
		if (client_query(&c[k]) < 0) {
			m.ok = 0;
			break;
		}
		m.count[slot / a->slots_per_round][k]++;
	}
	self_cpu_ns(&u1, &s1);
	m.user_ns[slot_kind(slot)] += u1 - u0;
	m.sys_ns[slot_kind(slot)] += s1 - s0;
	client_close(&c[K_PIMD]);
	client_close(&c[K_ECHO]);
	if (write(a->res_w, &m, sizeof m) != (ssize_t)sizeof m)
		_exit(1);
	_exit(m.ok ? 0 : 1);
}

static void tput_start(int i, void *arg, int ready_w, int start_r)
{
	(void)i;
	tput_child(arg, ready_w, start_r);
}

/* CPU seconds process pid has used so far in user and system time (utime, stime of
 * /proc/PID/stat); -1 when they cannot be read. */
static int proc_cpu_s(pid_t pid, double *user, double *sys)
{
	char path[64], buf[1024];
	unsigned long ut, st;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the command may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	*user = (double)ut / (double)sysconf(_SC_CLK_TCK);
	*sys = (double)st / (double)sysconf(_SC_CLK_TCK);
	return 0;
}

/* CPU seconds pimd has used so far, or -1. */
static double pimd_cpu_s(void)
{
	double u, k;
	return proc_cpu_s(pimd_pid, &u, &k) < 0 ? -1 : u + k;
}

/* What the throughput run measured, per server: the requests in all and per round, and the
 * CPU seconds in user and system time that the server and the clients (together) spent in its
 * slots (the server's negative: not read). */
struct tput {
	double requests[2], round_requests[TPUT_MAX_ROUNDS][2];
	double user_s[2], sys_s[2], client_user_s[2], client_sys_s[2];
};

/* Runs N_CLIENTS processes, each connected to both servers, for rounds x slots_per_round slots. */
static int measure_tput(unsigned rounds, unsigned slots_per_round, struct tput *t)
{
	const pid_t server[2] = { pimd_pid, echo_pid };
	double u0[2], k0[2], u1[2], k1[2];
	bool cpu = proc_cpu_s(server[0], &u0[0], &k0[0]) == 0 && proc_cpu_s(server[1], &u0[1], &k0[1]) == 0;
	int res[2];
	pid_t pids[N_CLIENTS];
	int n, ret = 0;

	*t = (struct tput){ 0 };
	uint64_t *release_at = mmap(NULL, sizeof *release_at, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				    -1, 0);
	if (release_at == MAP_FAILED)
		return fail("mmap: %s", strerror(errno));
	if (pipe2(res, O_CLOEXEC) < 0) {
		munmap(release_at, sizeof *release_at);
		return fail("pipe: %s", strerror(errno));
	}
	struct tput_arg a = { res[1], rounds, slots_per_round, release_at };
	struct crowd cw = { .start = tput_start, .arg = &a, .keep_r = res[0], .release_at = release_at };
	n = crowd_run(&cw, N_CLIENTS, pids);
	close(res[1]);
	if (n < N_CLIENTS)
		ret = -1;

	int reported = 0;
	struct tput_msg m;
	for (;;) {
		ssize_t r = read(res[0], &m, sizeof m);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof m)
			break;
		reported++;
		if (!m.ok)
			ret = -1;
		for (int k = 0; k < 2; k++) {
			for (unsigned i = 0; i < rounds; i++) {
				t->round_requests[i][k] += (double)m.count[i][k];
				t->requests[k] += (double)m.count[i][k];
			}
			t->client_user_s[k] += (double)m.user_ns[k] / 1e9;
			t->client_sys_s[k] += (double)m.sys_ns[k] / 1e9;
		}
	}
	cpu = cpu && proc_cpu_s(server[0], &u1[0], &k1[0]) == 0 && proc_cpu_s(server[1], &u1[1], &k1[1]) == 0;
	for (int k = 0; k < 2; k++) {
		t->user_s[k] = cpu ? u1[k] - u0[k] : -1;
		t->sys_s[k] = cpu ? k1[k] - k0[k] : -1;
	}
	if (crowd_wait(pids, n < 0 ? 0 : n) < 0)
		ret = -1;
	close(res[0]);
	munmap(release_at, sizeof *release_at);
	if (ret == 0 && reported != N_CLIENTS)
		ret = fail("%d of %d throughput clients reported", reported, N_CLIENTS);
	if (ret < 0)
		return fail("the throughput run failed");
	return 0;
}

/* ------------------------------------------------------------------ mixed workload */

/*
 * MIX_CLIENTS processes, each with its own connection, cycle through the requests of a shared
 * service: status, list, show, the placement and the decisions of a loaded MIX_REGIONS-region
 * model, a JIT-Q plan, and loading and removing a model of their own.  Every request's latency
 * is kept (in memory shared with the parent) for the p99.
 */
#define MIX_CLIENTS 64
#define MIX_REGIONS 30
#define MIX_MAX_PER_CLIENT 20000

enum mix_op { MIX_STATUS, MIX_LIST, MIX_SHOW, MIX_PLACEMENT, MIX_DECISIONS, MIX_JITQ, MIX_LOAD, MIX_REMOVE,
	      MIX_N };
static const char *const mix_name[MIX_N] = { "status", "list", "show", "placement", "decisions",
					     "jitq plan", "load", "remove" };
/* One client's cycle of 40 requests; clients start at different points of it. */
static const uint8_t mix_cycle[40] = {
	MIX_STATUS, MIX_SHOW, MIX_PLACEMENT, MIX_DECISIONS, MIX_STATUS, MIX_LIST, MIX_JITQ, MIX_STATUS,
	MIX_PLACEMENT, MIX_SHOW, MIX_DECISIONS, MIX_STATUS, MIX_LOAD, MIX_STATUS, MIX_SHOW, MIX_PLACEMENT,
	MIX_DECISIONS, MIX_LIST, MIX_STATUS, MIX_JITQ, MIX_STATUS, MIX_SHOW, MIX_PLACEMENT, MIX_DECISIONS,
	MIX_STATUS, MIX_LIST, MIX_JITQ, MIX_STATUS, MIX_PLACEMENT, MIX_SHOW, MIX_DECISIONS, MIX_STATUS,
	MIX_REMOVE, MIX_STATUS, MIX_SHOW, MIX_PLACEMENT, MIX_DECISIONS, MIX_LIST, MIX_STATUS, MIX_JITQ,
};

struct mix_slot {
	uint32_t n;
	int32_t ok;
	uint8_t op[MIX_MAX_PER_CLIENT];
	uint32_t ns[MIX_MAX_PER_CLIENT]; /* latency, capped at ~4.3 s */
};

/* A serialized manifest of MIX_REGIONS elementwise regions over two buffers, named name. */
static uint8_t *mix_manifest(const char *name, size_t *len)
{
	Pim__Manifest m = PIM__MANIFEST__INIT;
	Pim__Allocation a[2], *ap[2] = { &a[0], &a[1] };
	Pim__Region r[MIX_REGIONS], *rp[MIX_REGIONS];
	Pim__Operand o[MIX_REGIONS][2], *op[MIX_REGIONS][2];
	char rname[MIX_REGIONS][16];

	m.name = (char *)name;
	m.source = "bench_query";
	for (int k = 0; k < 2; k++) {
		pim__allocation__init(&a[k]);
		a[k].id = (uint32_t)k;
		a[k].bytes = 1 << 20;
		a[k].kind = PIM__ALLOC_KIND__ALLOC_KIND_ALLOC;
		a[k].name = k ? "out" : "in";
	}
	m.allocations = ap;
	m.n_allocations = 2;
	for (int i = 0; i < MIX_REGIONS; i++) {
		pim__region__init(&r[i]);
		snprintf(rname[i], sizeof rname[i], "r%d", i);
		r[i].id = (uint32_t)i;
		r[i].name = rname[i];
		r[i].op = "linalg.generic";
		r[i].location = "";
		r[i].order = (uint32_t)i;
		r[i].n_par = r[i].n_total = 262144;
		r[i].trip = 1;
		for (int k = 0; k < 2; k++) {
			pim__operand__init(&o[i][k]);
			o[i][k].allocation_id = (uint32_t)((i + k) % 2);
			o[i][k].bytes = 1 << 20;
			o[i][k].role = k ? PIM__OPERAND_ROLE__OPERAND_ROLE_OUT : PIM__OPERAND_ROLE__OPERAND_ROLE_IN;
			op[i][k] = &o[i][k];
		}
		r[i].operands = op[i];
		r[i].n_operands = 2;
		rp[i] = &r[i];
	}
	m.regions = rp;
	m.n_regions = MIX_REGIONS;
	*len = pim__manifest__get_packed_size(&m);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (buf)
		pim__manifest__pack(&m, buf);
	return buf;
}

/* A raw request (placement or decisions of the shared model) and a check of its answer's kind. */
static int mix_call(pim_client *c, const Pim__Request *req, Pim__Response__BodyCase want)
{
	size_t len = pim__request__get_packed_size(req), rlen;
	uint8_t buf[256];
	void *resp;

	if (len > sizeof buf)
		return -1;
	pim__request__pack(req, buf);
	if (pim_call(c, buf, len, &resp, &rlen) < 0)
		return -1;
	Pim__Response *r = pim__response__unpack(NULL, rlen, resp);
	free(resp);
	int ok = r && r->body_case == want ? 0 : -1;
	if (r && r->body_case == PIM__RESPONSE__BODY_ERROR && r->error)
		fail("%s", r->error->message);
	pim__response__free_unpacked(r, NULL);
	return ok;
}

static int mix_one(pim_client *c, enum mix_op op, const char *own, const uint8_t *own_m, size_t own_len,
		   bool *own_loaded)
{
	static const Pim__Placement pl = { PROTOBUF_C_MESSAGE_INIT(&pim__placement__descriptor), "mix", NULL,
					   "", "", 0, NULL, 0 };
	static const Pim__Decisions de = { PROTOBUF_C_MESSAGE_INIT(&pim__decisions__descriptor), "mix", NULL,
					   "", "" };
	struct pim_model_info info, *list;
	struct pim_status st;
	size_t n;
	int r = 0;

	switch (op) {
	case MIX_STATUS:
		return pim_status(c, &st);
	case MIX_LIST:
		r = pim_model_list(c, &list, &n);
		if (r == 0)
			free(list);
		return r;
	case MIX_SHOW:
		return pim_model_show(c, "mix", &info, NULL, NULL);
	case MIX_PLACEMENT: {
		Pim__Request req = PIM__REQUEST__INIT;
		req.body_case = PIM__REQUEST__BODY_PLACEMENT;
		req.placement = (Pim__Placement *)&pl;
		return mix_call(c, &req, PIM__RESPONSE__BODY_PLACEMENT);
	}
	case MIX_DECISIONS: {
		Pim__Request req = PIM__REQUEST__INIT;
		req.body_case = PIM__REQUEST__BODY_DECISIONS;
		req.decisions = (Pim__Decisions *)&de;
		return mix_call(c, &req, PIM__RESPONSE__BODY_DECISIONS);
	}
	case MIX_JITQ: {
		struct pim_jitq_request rq = { .preset = "bert-340M" };
		pim_jitq_plan *plan;
		r = pim_jitq_plan_fetch(c, &rq, &plan);
		if (r == 0)
			pim_jitq_plan_free(plan);
		return r;
	}
	case MIX_LOAD:
		r = pim_model_load(c, own_m, own_len, PIM_LOAD_REPLACE, NULL, NULL);
		*own_loaded = r == 0;
		return r;
	case MIX_REMOVE:
		if (!*own_loaded)
			return pim_status(c, &st); /* nothing to remove yet: the cycle started after a load */
		*own_loaded = false;
		return pim_model_remove(c, own);
	default:
		return -1;
	}
}

struct mix_arg {
	struct mix_slot *slots;
	uint64_t dur_ns;
	bool writes; /* false: status in place of load and remove */
};

static __attribute__((noreturn)) void mix_child(int idx, void *arg, int ready_w, int start_r)
{
	const struct mix_arg *a = arg;
	struct mix_slot *slot = &a->slots[idx];
	uint64_t dur_ns = a->dur_ns;
	char own[32], b = 1;
	size_t own_len;
	bool loaded = false;
	struct client c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	snprintf(own, sizeof own, "mix-%d", idx);
	uint8_t *own_m = mix_manifest(own, &own_len);
	if (!own_m || client_open(&c, K_PIMD) < 0)
		_exit(1);
	pim_client_set_timeout(c.pc, 60000);
	if (write(ready_w, &b, 1) != 1)
		_exit(1);
	while (read(start_r, &b, 1) < 0 && errno == EINTR) /* EOF: go */
		;
	uint64_t end = now_ns() + dur_ns;
	slot->ok = 1;
	for (unsigned k = (unsigned)idx * 7; slot->n < MIX_MAX_PER_CLIENT; k++) {
		enum mix_op op = (enum mix_op)mix_cycle[k % sizeof mix_cycle];
		if (!a->writes && (op == MIX_LOAD || op == MIX_REMOVE))
			op = MIX_STATUS;
		uint64_t t0 = now_ns();
		if (t0 >= end)
			break;
		if (mix_one(c.pc, op, own, own_m, own_len, &loaded) < 0) {
			fail("mixed workload, %s: %s", mix_name[op], pim_client_error(c.pc));
			slot->ok = 0;
			break;
		}
		uint64_t dt = now_ns() - t0;
		slot->op[slot->n] = (uint8_t)op;
		slot->ns[slot->n] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
		slot->n++;
	}
	if (loaded)
		pim_model_remove(c.pc, own);
	client_close(&c);
	free(own_m);
	_exit(slot->ok ? 0 : 1);
}


static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * The share of this machine's CPU time its hypervisor gave to others meanwhile ("steal" in
 * /proc/stat): on a shared host a phase that lost much of it measures the host as much as pimd
 * (at 35-39% of steal the mixed workload's reads p99 was 34 ms, against 6-7 ms in the same
 * hour's quieter runs).  Each goal carries the steal of the phase that measured it.
 */
struct cpu_mark {
	uint64_t total, steal;
	bool ok;
};

static struct cpu_mark cpu_mark_now(void)
{
	struct cpu_mark m = { 0 };
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	if (f) {
		m.ok = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
			      &v[5], &v[6], &v[7]) == 8;
		fclose(f);
	}
	for (int i = 0; i < 8; i++)
		m.total += v[i];
	m.steal = v[7];
	return m;
}

/* Steal since m, as a share (-1: not known). */
static double steal_since(const struct cpu_mark *m)
{
	struct cpu_mark n = cpu_mark_now();
	if (!m->ok || !n.ok || n.total <= m->total)
		return -1;
	return (double)(n.steal - m->steal) / (double)(n.total - m->total);
}

/* Said with a phase's figures and goals when it is at least this. */
#define STEAL_NOTED 0.01
static double phase_steal = -1;

static void steal_print(double steal)
{
	if (steal >= STEAL_NOTED)
		printf("  the hypervisor took %.0f%% of this machine's CPU time meanwhile (steal)\n", 100 * steal);
}

/* The goals, as measured: printed again at the end, one line each. */
#define GOALS_MAX 8
static struct goal {
	char what[96];
	double value, limit;
	bool at_most; /* else at least */
	const char *unit;
	double steal; /* phase_steal when measured */
} goals[GOALS_MAX];
static unsigned n_goals;

static bool goal(const char *what, double value, bool at_most, double limit, const char *unit)
{
	bool met = at_most ? value <= limit : value >= limit;
	if (n_goals < GOALS_MAX) {
		struct goal *g = &goals[n_goals++];
		*g = (struct goal){ .value = value, .limit = limit, .at_most = at_most, .unit = unit,
				    .steal = phase_steal };
		snprintf(g->what, sizeof g->what, "%s", what);
	}
	return met;
}

static void goals_print(void)
{
	double worst = 0;
	printf("goals:\n");
	for (unsigned i = 0; i < n_goals; i++) {
		const struct goal *g = &goals[i];
		bool met = g->at_most ? g->value <= g->limit : g->value >= g->limit;
		printf("  %-44s %8.2f%s (goal %s %.2f%s): %s", g->what, g->value, g->unit,
		       g->at_most ? "<=" : ">=", g->limit, g->unit, met ? "met" : "missed");
		if (g->steal >= STEAL_NOTED)
			printf(" (steal %.0f%%)", 100 * g->steal);
		printf("\n");
		worst = g->steal > worst ? g->steal : worst;
	}
	if (worst >= 5 * STEAL_NOTED)
		printf("the hypervisor took up to %.0f%% of the CPU time while these were measured: the figures "
		       "are the host's as much as pimd's; measure again when it is quieter\n", 100 * worst);
}

static int measure_mix(uint64_t dur_ns, bool writes)
{
	struct mix_slot *slots = mmap(NULL, MIX_CLIENTS * sizeof *slots, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int ret = 0, n;
	pid_t pids[MIX_CLIENTS];
	size_t len;

	if (slots == MAP_FAILED)
		return fail("mmap: %s", strerror(errno));
	/* the shared model every client asks about */
	uint8_t *m = mix_manifest("mix", &len);
	struct client c;
	if (!m || client_open(&c, K_PIMD) < 0 || pim_model_load(c.pc, m, len, PIM_LOAD_REPLACE, NULL, NULL) < 0) {
		free(m);
		munmap(slots, MIX_CLIENTS * sizeof *slots);
		return fail("loading the mixed workload's model");
	}
	client_close(&c);
	free(m);
	struct mix_arg a = { slots, dur_ns, writes };
	struct crowd cw = { .start = mix_child, .arg = &a, .keep_r = -1 };
	struct cpu_mark mark = cpu_mark_now();
	n = crowd_run(&cw, MIX_CLIENTS, pids);
	double cpu0 = pimd_cpu_s();
	uint64_t t0 = cw.released_ns;
	if (crowd_wait(pids, n < 0 ? 0 : n) < 0)
		ret = -1;
	double wall = (double)(now_ns() - t0) / 1e9, cpu = pimd_cpu_s() - cpu0;
	phase_steal = steal_since(&mark);
	if (ret < 0 || n < MIX_CLIENTS) {
		munmap(slots, MIX_CLIENTS * sizeof *slots);
		return fail("the mixed workload failed");
	}

	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += slots[i].n;
	uint32_t *all = malloc((total ? total : 1) * sizeof *all), *one = malloc((total ? total : 1) * sizeof *one);
	if (!all || !one) {
		free(all), free(one);
		munmap(slots, MIX_CLIENTS * sizeof *slots);
		return fail("out of memory");
	}
	size_t k = 0;
	for (int i = 0; i < n; i++)
		for (uint32_t j = 0; j < slots[i].n; j++)
			all[k++] = slots[i].ns[j];
	qsort(all, total, sizeof *all, cmp_u32);
	double p99 = total ? (double)all[(size_t)(0.99 * (double)(total - 1))] / 1e6 : 0;
	double p50 = total ? (double)all[total / 2] / 1e6 : 0;
	double rps = (double)total / wall;
	bool met = goal(writes ? "mixed with load/remove: p99 of all" : "mixed, reads only: p99 of all", p99, true,
			20, " ms");
	printf("  %s: %zu requests in %.2f s: %.0f requests/s; p50 %.2f ms, p99 %.2f ms (goal <= 20 ms: %s); "
	       "pimd CPU %.0f%% of one core\n", writes ? "with load/remove" : "reads only (status for load/remove)",
	       total, wall, rps, p50, p99, met ? "met" : "missed", cpu >= 0 ? 100 * cpu / wall : -1);
	if (writes) {
		/* the reads among them: everything but load and remove */
		size_t nr = 0;
		for (int i = 0; i < n; i++)
			for (uint32_t j = 0; j < slots[i].n; j++)
				if (slots[i].op[j] != MIX_LOAD && slots[i].op[j] != MIX_REMOVE)
					one[nr++] = slots[i].ns[j];
		qsort(one, nr, sizeof *one, cmp_u32);
		double rp99 = nr ? (double)one[(size_t)(0.99 * (double)(nr - 1))] / 1e6 : 0;
		met = goal("mixed with load/remove: p99 of the reads", rp99, true, 10, " ms");
		printf("    reads      %7zu requests  p99 %7.2f ms (goal <= 10 ms: %s)\n", nr, rp99,
		       met ? "met" : "missed");
	}
	steal_print(phase_steal);
	for (int o = 0; o < MIX_N; o++) {
		size_t c1 = 0;
		for (int i = 0; i < n; i++)
			for (uint32_t j = 0; j < slots[i].n; j++)
				if (slots[i].op[j] == o)
					one[c1++] = slots[i].ns[j];
		if (!c1)
			continue;
		qsort(one, c1, sizeof *one, cmp_u32);
		printf("    %-10s %7zu requests  p50 %7.2f ms  p99 %7.2f ms\n", mix_name[o], c1,
		       (double)one[c1 / 2] / 1e6, (double)one[(size_t)(0.99 * (double)(c1 - 1))] / 1e6);
	}
	free(all);
	free(one);
	munmap(slots, MIX_CLIENTS * sizeof *slots);
	return 0;
}

/* ------------------------------------------------------------------ main */

static double us(uint64_t ns) { return (double)ns / 1000.0; }

static int run(const char *pimd_path, const struct params *pp, bool quick, bool mixed_only,
	       bool status_only)
{
	struct lat_result lr;
	double load[3] = { 0, 0, 0 };

	if (getloadavg(load, 3) < 0)
		load[0] = load[1] = load[2] = -1;
	printf("bench_query%s: %s, %ld CPUs online, loadavg %.2f %.2f %.2f\n", quick ? " (quick)" : "",
	       pimd_path, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);

	if (start_pimd(pimd_path) < 0)
		return -1;
	if (mixed_only)
		goto mixed;
	if (probe_sizes((uint64_t)pp->warmup + (uint64_t)pp->rounds * pp->batch / 2 + 2) < 0)
		return -1;
	printf("frames: Status request %u B, Status response %u B (payload, + %u B header); "
	       "echo frames are the same sizes\n", req_size, resp_size, FRAME_HEADER_BYTES);
	if (start_echo() < 0)
		return -1;

	printf("latency: %u rounds x %u requests each, alternating order (warm-up %u each)\n",
	       pp->rounds, pp->batch, pp->warmup);
	fflush(stdout);
	struct cpu_mark mark = cpu_mark_now();
	if (measure_latency(pp, &lr) < 0)
		return -1;
	phase_steal = steal_since(&mark);
	printf("                        p50 (us)   p99 (us)  mean (us)\n");
	for (int k = 0; k < 2; k++)
		printf("  %-18s %11.2f %10.2f %10.2f\n", k == K_PIMD ? "pimd (pim_status)" : "raw echo",
		       us(lr.p50[k]), us(lr.p99[k]), us(lr.mean[k]));
	double r50 = (double)lr.p50[K_PIMD] / (double)lr.p50[K_ECHO];
	double r99 = (double)lr.p99[K_PIMD] / (double)lr.p99[K_ECHO];
	printf("  %-18s %10.2fx %9.2fx\n", "ratio pimd/echo", r50, r99);
	printf("  per-round p50 ratio: median %.2fx, range %.2fx .. %.2fx\n", lr.round_ratio_med,
	       lr.round_ratio_min, lr.round_ratio_max);
	bool m50 = goal("status latency p50, pimd/echo", r50, true, 1.2, "x");
	bool m99 = goal("status latency p99, pimd/echo", r99, true, 1.5, "x");
	printf("status p50 %.2fx echo (goal <= 1.2x: %s); p99 %.2fx echo (goal <= 1.5x: %s)\n", r50,
	       m50 ? "met" : "missed", r99, m99 ? "met" : "missed");
	steal_print(phase_steal);

	unsigned spr = (unsigned)(2 * pp->tput_ns / TPUT_SLOT_NS);
	if (pp->tput_rounds < 1 || pp->tput_rounds > TPUT_MAX_ROUNDS || spr < 2 || spr % 2)
		return fail("throughput: %u rounds of %u slots: 1 to %d rounds of an even number of slots",
			    pp->tput_rounds, spr, TPUT_MAX_ROUNDS);
	printf("throughput: %d client processes, each connected to both, %u round%s of %.2f s a server, "
	       "in slots of %.0f ms taken in turn (pimd, echo, echo, pimd, ...)\n", N_CLIENTS, pp->tput_rounds,
	       pp->tput_rounds == 1 ? "" : "s", (double)pp->tput_ns / 1e9, (double)TPUT_SLOT_NS / 1e6);
	fflush(stdout);
	struct tput t;
	mark = cpu_mark_now();
	if (measure_tput(pp->tput_rounds, spr, &t) < 0)
		return -1;
	double secs = (double)pp->tput_rounds * (double)pp->tput_ns / 1e9; /* with each server */
	for (int k = 0; k < 2; k++) {
		double q = t.requests[k];
		printf("  %-18s %10.0f requests/s\n", kind_name[k], q / secs);
		if (t.user_s[k] >= 0 && q > 0)
			printf("  %-18s CPU a request: server %.2f us (user %.2f, system %.2f), client %.2f us "
			       "(user %.2f, system %.2f)\n", "", (t.user_s[k] + t.sys_s[k]) * 1e6 / q,
			       t.user_s[k] * 1e6 / q, t.sys_s[k] * 1e6 / q,
			       (t.client_user_s[k] + t.client_sys_s[k]) * 1e6 / q, t.client_user_s[k] * 1e6 / q,
			       t.client_sys_s[k] * 1e6 / q);
	}
	double tr = t.requests[K_PIMD] / (t.requests[K_ECHO] > 0 ? t.requests[K_ECHO] : 1);
	phase_steal = steal_since(&mark);
	printf("  per-round ratio:");
	for (unsigned i = 0; i < pp->tput_rounds; i++)
		printf(" %.2f", t.round_requests[i][K_PIMD] / (t.round_requests[i][K_ECHO] > 0 ? t.round_requests[i][K_ECHO] : 1));
	printf("\n");
	bool tmet = goal("8-client throughput, pimd/echo", tr, false, 0.95, "x");
	printf("  %-18s %10.2fx (goal >= 0.95x: %s)\n", "ratio pimd/echo", tr, tmet ? "met" : "missed");
	steal_print(phase_steal);
	if (status_only) {
		goals_print();
		return 0;
	}

mixed:
	printf("mixed workload: %d client processes x %.2f s (status, list, show, placement and decisions of "
	       "a %d-region model, JIT-Q plan, load/remove)\n", MIX_CLIENTS, (double)pp->mix_ns / 1e9,
	       MIX_REGIONS);
	fflush(stdout);
	/* the same without the writes, whose commits wait for the disk (synchronous=FULL) */
	if (measure_mix(pp->mix_ns, true) < 0 || measure_mix(pp->mix_ns, false) < 0)
		return -1;
	goals_print();
	return 0;
}

int main(int argc, char **argv)
{
	const char *pimd_path = "build/pimd";
	bool quick = false, mixed_only = false, status_only = false, path_given = false;
	struct sigaction sa = { .sa_handler = on_signal };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--mixed"))
			mixed_only = true;
		else if (!strcmp(argv[i], "--status"))
			status_only = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: bench_query [PIMD_PATH (default build/pimd)] [--quick] [--mixed | --status]\n");
			return 0;
		} else if (argv[i][0] != '-' && !path_given) {
			pimd_path = argv[i];
			path_given = true;
		} else {
			fprintf(stderr, "usage: bench_query [PIMD_PATH (default build/pimd)] [--quick] [--mixed | --status]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	main_pid = getpid();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	snprintf(tmp_dir, sizeof tmp_dir, "/tmp/bench_query.XXXXXX");
	if (!mkdtemp(tmp_dir)) {
		tmp_dir[0] = 0;
		fail("mkdtemp: %s", strerror(errno));
		return 1;
	}
	snprintf(pimd_sock, sizeof pimd_sock, "%s/pimd.sock", tmp_dir);
	snprintf(echo_sock, sizeof echo_sock, "%s/echo.sock", tmp_dir);
	snprintf(state_dir, sizeof state_dir, "%s/state", tmp_dir);
	snprintf(conf_path, sizeof conf_path, "%s/pimd.conf", tmp_dir);

	uint64_t t0 = now_ns();
	int r = run(pimd_path, quick ? &quick_params : &normal_params, quick, mixed_only, status_only);
	if (cleanup() < 0)
		r = -1;
	free(req_payload);
	if (r < 0) {
		fprintf(stderr, "bench_query: FAILED\n");
		return 1;
	}
	printf("done in %.1f s\n", (double)(now_ns() - t0) / 1e9);
	return 0;
}
