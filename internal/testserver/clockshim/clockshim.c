// clockshim offsets a process's wall clock (CLOCK_REALTIME, gettimeofday,
// time) by a number of nanoseconds kept in the file $DLOCK_CLOCK_FILE,
// which the test maps too and changes while the process runs. Monotonic
// clocks are left alone. It calls the kernel directly instead of looking
// the real functions up with dlsym, which would allocate, and re-enter
// itself through an allocator (jemalloc in redis-server) that reads the
// clock while it starts.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ns;

__attribute__((constructor)) static void clockshim_init(void) {
	const char *path = getenv("DLOCK_CLOCK_FILE");
	if (!path) return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return;
	void *p = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED) offset_ns = (volatile int64_t *)p;
}

static int64_t offset(void) { return offset_ns ? __atomic_load_n(offset_ns, __ATOMIC_RELAXED) : 0; }

static int real_clock_gettime(clockid_t clk, struct timespec *ts) {
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

static void shift(struct timespec *ts) {
	int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset();
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	if (ts->tv_nsec < 0) {
		ts->tv_nsec += 1000000000;
		ts->tv_sec--;
	}
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
	int r = real_clock_gettime(clk, ts);
	if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) shift(ts);
	return r;
}

int __clock_gettime(clockid_t clk, struct timespec *ts) { return clock_gettime(clk, ts); }

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	if (!tv) return 0;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
