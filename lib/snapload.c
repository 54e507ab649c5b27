#include "snapload.h"
#include "common.h"
#include "log.h"

/* Placeholder until the parallel loader lands: refuse rather than misapply. */
int
snapload_section(struct input *in, const struct field *f, size_t nf,
				 const struct snapload_opts *opts, lsn_t *position)
{
	log_error("%s:%llu: snapshot sections are not supported by this build",
			  input_name(in), (unsigned long long) input_lineno(in));
	return EXIT_UNSUPPORTED;
}
