#include "checkpoint.h"
#include "buf.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECKPOINT_MAX 4096

static int
fsync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd, rc;

	if (copy == NULL)
		return -1;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
	free(copy);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

static bool
slot_name_ok(const char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r')
			return false;
	return true;
}

int
checkpoint_write(const char *path, const struct checkpoint *cp,
				 char *err, size_t errlen)
{
	struct buf tmp = BUF_INIT, body = BUF_INIT;
	char l[LSN_BUFSZ];
	int fd = -1, rc = -1;

	if (!slot_name_ok(cp->slot))
	{
		snprintf(err, errlen, "invalid slot name for checkpoint file \"%s\"", path);
		return -1;
	}
	buf_printf(&body, "%s\n", lsn_format(cp->lsn, l));
	if (cp->sysid[0])
		buf_printf(&body, "sysid=%s\n", cp->sysid);
	if (cp->timeline)
		buf_printf(&body, "timeline=%u\n", cp->timeline);
	if (cp->slot[0])
		buf_printf(&body, "slot=%s\n", cp->slot);

	buf_printf(&tmp, "%s.tmp.%ld", path, (long) getpid());
	fd = open(buf_cstr(&tmp), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
	{
		snprintf(err, errlen, "cannot create checkpoint file \"%s\": %s", tmp.data, strerror(errno));
		goto out;
	}
	for (size_t off = 0; off < body.len;)
	{
		ssize_t w = write(fd, body.data + off, body.len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
		{
			snprintf(err, errlen, "cannot write checkpoint file \"%s\": %s", tmp.data, strerror(errno));
			goto out;
		}
		off += (size_t) w;
	}
	if (fsync(fd) != 0)
	{
		snprintf(err, errlen, "cannot fsync checkpoint file \"%s\": %s", tmp.data, strerror(errno));
		goto out;
	}
	close(fd);
	fd = -1;
	if (rename(tmp.data, path) != 0)
	{
		snprintf(err, errlen, "cannot rename \"%s\" to \"%s\": %s", tmp.data, path, strerror(errno));
		goto out;
	}
	/* The rename is durable only once the directory entry is. */
	if (fsync_dir_of(path) != 0)
	{
		snprintf(err, errlen, "cannot fsync the directory of \"%s\": %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
	{
		close(fd);
		unlink(tmp.data);
	}
	buf_free(&tmp);
	buf_free(&body);
	return rc;
}

static enum checkpoint_status
invalid(char *err, size_t errlen, const char *path, const char *why, int lineno)
{
	if (lineno > 0)
		snprintf(err, errlen, "invalid checkpoint file \"%s\": %s at line %d", path, why, lineno);
	else
		snprintf(err, errlen, "invalid checkpoint file \"%s\": %s", path, why);
	return CP_INVALID;
}

enum checkpoint_status
checkpoint_read(const char *path, struct checkpoint *cp, char *err, size_t errlen)
{
	char data[CHECKPOINT_MAX + 1];
	size_t len = 0;
	int fd;

	memset(cp, 0, sizeof(*cp));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return CP_MISSING;
		snprintf(err, errlen, "cannot open checkpoint file \"%s\": %s", path, strerror(errno));
		return CP_INVALID;
	}
	for (;;)
	{
		ssize_t r = read(fd, data + len, CHECKPOINT_MAX + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
		{
			snprintf(err, errlen, "cannot read checkpoint file \"%s\": %s", path, strerror(errno));
			close(fd);
			return CP_INVALID;
		}
		if (r == 0)
			break;
		len += (size_t) r;
		if (len > CHECKPOINT_MAX)
		{
			close(fd);
			return invalid(err, errlen, path, "file too large", 0);
		}
	}
	close(fd);
	return checkpoint_parse(path, data, len, cp, err, errlen);
}

enum checkpoint_status
checkpoint_parse(const char *path, char *data, size_t len, struct checkpoint *cp,
				 char *err, size_t errlen)
{
	int lineno = 0;
	char *line, *next;

	memset(cp, 0, sizeof(*cp));
	if (len > CHECKPOINT_MAX)
		return invalid(err, errlen, path, "file too large", 0);
	data[len] = '\0';
	if (len == 0)
		return invalid(err, errlen, path, "file is empty", 0);
	if (data[len - 1] != '\n')
		return invalid(err, errlen, path, "last line is incomplete", 0);
	if (memchr(data, '\0', len))
		return invalid(err, errlen, path, "contains a NUL byte", 0);

	for (line = data; *line; line = next)
	{
		char *nl = strchr(line, '\n');

		*nl = '\0';
		next = nl + 1;
		lineno++;
		if (lineno == 1)
		{
			if (!lsn_parse(line, &cp->lsn))
				return invalid(err, errlen, path, "first line is not an LSN", 1);
			continue;
		}
		char *eq = strchr(line, '=');

		if (eq == NULL)
			return invalid(err, errlen, path, "expected key=value", lineno);
		*eq = '\0';
		const char *val = eq + 1;

		if (strcmp(line, "sysid") == 0)
		{
			size_t n = strlen(val);

			if (n == 0 || n >= sizeof(cp->sysid) || strspn(val, "0123456789") != n)
				return invalid(err, errlen, path, "bad sysid", lineno);
			memcpy(cp->sysid, val, n + 1);
		}
		else if (strcmp(line, "timeline") == 0)
		{
			char *end;
			unsigned long t;

			errno = 0;
			t = strtoul(val, &end, 10);
			if (errno || *end || end == val || t == 0 || t > UINT32_MAX)
				return invalid(err, errlen, path, "bad timeline", lineno);
			cp->timeline = (uint32_t) t;
		}
		else if (strcmp(line, "slot") == 0)
		{
			size_t n = strlen(val);

			if (n == 0 || n >= sizeof(cp->slot))
				return invalid(err, errlen, path, "bad slot", lineno);
			memcpy(cp->slot, val, n + 1);
		}
		/* Unknown keys are ignored so newer writers stay readable. */
	}
	return CP_OK;
}
