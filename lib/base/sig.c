#include "sig.h"
#include "common.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int pipefd[2] = {-1, -1};
static volatile sig_atomic_t stop_signal = 0;

static void
on_signal(int signo)
{
	int saved = errno;
	unsigned char b = (unsigned char) signo;

	if (stop_signal == 0)
		stop_signal = signo;
	if (write(pipefd[1], &b, 1) < 0)
	{
		/* Pipe full: a wake-up is already pending. */
	}
	errno = saved;
}

int
sig_setup(void)
{
	struct sigaction sa;

	if (pipefd[0] >= 0)
		return pipefd[0];
	if (pipe(pipefd) != 0)
		log_fatal(EXIT_RUNTIME, "cannot create signal pipe: %s", strerror(errno));
	for (int i = 0; i < 2; i++)
	{
		fcntl(pipefd[i], F_SETFL, fcntl(pipefd[i], F_GETFL) | O_NONBLOCK);
		fcntl(pipefd[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return pipefd[0];
}

int
sig_fd(void)
{
	return pipefd[0];
}

bool
sig_stop_requested(void)
{
	return stop_signal != 0;
}

int
sig_which(void)
{
	return stop_signal;
}

void
sig_drain(void)
{
	unsigned char b[64];

	while (pipefd[0] >= 0 && read(pipefd[0], b, sizeof(b)) > 0)
		;
}

const char *
signal_name(int sig)
{
	switch (sig)
	{
		case SIGINT: return "SIGINT";
		case SIGTERM: return "SIGTERM";
		case SIGHUP: return "SIGHUP";
		default: return "a signal";
	}
}
