/* SPDX-License-Identifier: MIT */
/*
 * fs-shutdown DIR: stops the ext4 file system that holds DIR dead, as a failing disk or a
 * power cut would: nothing more reaches the disk, not even the journal (EXT4_IOC_SHUTDOWN with
 * EXT4_GOING_FLAGS_NOLOGFLUSH), and every later access fails with EIO.  What was not yet synced
 * is lost once the file system is mounted again.  For tests/stress/durable.sh; needs root.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* From the kernel's fs/ext4/ext4.h (not in Debian 12's uapi headers). */
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

int main(int argc, char **argv)
{
	uint32_t flags = EXT4_GOING_FLAGS_NOLOGFLUSH;

	if (argc != 2) {
		fprintf(stderr, "usage: fs-shutdown DIR\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, EXT4_IOC_SHUTDOWN, &flags) < 0) {
		fprintf(stderr, "fs-shutdown: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}
