#include "srcstatus.h"
#include "buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = {
	[SRC_CONNECTED] = "connected",
	[SRC_RECONNECTING] = "reconnecting",
	[SRC_DISCONNECTED] = "disconnected",
};

const char *
srcstatus_name(enum src_state state)
{
	return names[state];
}

int
srcstatus_write(const char *path, const struct src_status *st, char *err, size_t errlen)
{
	struct buf tmp = BUF_INIT;
	char line[64];
	int n = snprintf(line, sizeof(line), "%s\t%u\n", srcstatus_name(st->state), (unsigned) st->reconnects);
	int fd, rc = -1;
	bool written;

	buf_printf(&tmp, "%s.tmp.%ld", path, (long) getpid());
	fd = open(buf_cstr(&tmp), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
	{
		snprintf(err, errlen, "cannot create connection file \"%s\": %s", tmp.data, strerror(errno));
		goto out;
	}
	written = write(fd, line, (size_t) n) == n;
	if (close(fd) != 0 || !written)
	{
		snprintf(err, errlen, "cannot write connection file \"%s\": %s", tmp.data, strerror(errno));
		unlink(tmp.data);
		goto out;
	}
	if (rename(tmp.data, path) != 0)
	{
		snprintf(err, errlen, "cannot rename \"%s\" to \"%s\": %s", tmp.data, path, strerror(errno));
		unlink(tmp.data);
		goto out;
	}
	rc = 0;
out:
	buf_free(&tmp);
	return rc;
}

/* Parse one line (with or without its LF). */
static bool
srcstatus_parse(const char *line, size_t len, struct src_status *st)
{
	const char *tab = memchr(line, '\t', len);
	uint64_t n = 0;
	size_t i;
	int s;

	if (len > 0 && line[len - 1] == '\n')
		len--;
	if (tab == NULL || (size_t) (tab - line) >= len)
		return false;
	for (s = 0; s < (int) (sizeof(names) / sizeof(names[0])); s++)
		if (strlen(names[s]) == (size_t) (tab - line) && memcmp(line, names[s], (size_t) (tab - line)) == 0)
			break;
	if (s == (int) (sizeof(names) / sizeof(names[0])))
		return false;
	i = (size_t) (tab - line) + 1;
	if (i == len)
		return false;
	for (; i < len; i++)
	{
		if (line[i] < '0' || line[i] > '9' || n > UINT32_MAX / 10)
			return false;
		n = n * 10 + (uint64_t) (line[i] - '0');
	}
	if (n > UINT32_MAX)
		return false;
	st->state = (enum src_state) s;
	st->reconnects = (uint32_t) n;
	return true;
}

bool
srcstatus_read(const char *path, struct src_status *st)
{
	char line[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, line, sizeof(line));
	close(fd);
	/* A whole line: the writer renames complete files into place. */
	if (n <= 0 || n == (ssize_t) sizeof(line) || line[n - 1] != '\n')
		return false;
	return srcstatus_parse(line, (size_t) n, st);
}
