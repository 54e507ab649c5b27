#include "pace.h"
#include "common.h"

#include <poll.h>

#define QUIET_MS 2
#define RATE_WINDOW_MS 20
#define LIVE_BYTES (32 * 1024)

void
pace_tick(struct pace *p)
{
	uint64_t now = now_ms(), since = now - p->start_ms;

	if (since < RATE_WINDOW_MS)
		return;
	p->prev = since < 2 * RATE_WINDOW_MS ? p->cur : 0;
	p->cur = 0;
	p->start_ms = now;
}

bool
pace_live(struct pace *p)
{
	pace_tick(p);
	return p->prev + p->cur < LIVE_BYTES;
}

bool
pace_quiet(int fd, uint64_t batch_start_ms, uint64_t max_delay_ms)
{
	struct pollfd pfd = {fd, POLLIN, 0};
	uint64_t ms = QUIET_MS;

	if (batch_start_ms != 0)
	{
		uint64_t age = now_ms() - batch_start_ms;

		if (age >= max_delay_ms)
			return true;
		if (max_delay_ms - age < ms)
			ms = max_delay_ms - age;
	}
	return poll(&pfd, 1, (int) ms) <= 0;
}
