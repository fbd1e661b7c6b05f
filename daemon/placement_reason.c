/* SPDX-License-Identifier: MIT */
/*
 * placement_reason.c: the explanation of a placement decision (placement.h,
 * placement_format_reason): which of C1..C4 held, each comparison with its two sides in
 * figures, and why a marginal decision is one.
 */
#include "placement_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ reasons */

static void fmt_seconds(char *b, size_t n, double s)
{
	if (isnan(s))
		snprintf(b, n, "?");
	else if (s >= 1)
		snprintf(b, n, "%.2f s", s);
	else if (s >= 1e-3)
		snprintf(b, n, "%.2f ms", s * 1e3);
	else if (s >= 1e-6)
		snprintf(b, n, "%.2f us", s * 1e6);
	else
		snprintf(b, n, "%.2f ns", s * 1e9);
}

static const char *cmp_text(const struct placement_cond *c, const char *ge, const char *lt)
{
	return c->lhs >= c->rhs ? ge : lt;
}

/* Appends with snprintf semantics: *pos keeps counting past len so the total length is returned. */
_printf_(4, 5) static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		*pos += (size_t)k;
}

static void reason_c3(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	const struct placement_cond *c = &d->cond[PL_C3];

	if (c->state == PL_COND_NO_DATA || isnan(c->lhs)) {
		append(buf, len, pos, "C3 not evaluable (no read counts)");
		return;
	}
	append(buf, len, pos, "C3: BW_read %.2f GB/s %s θ %.2f GB/s%s%s", c->lhs / 1e9,
	       cmp_text(c, ">=", "<"), c->rhs / 1e9, d->bw_estimated ? " (estimated)" : "",
	       d->theta_from_source ? " (θ from the measuring host's B_cpu)" : "");
}

static void reason_c4(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	const struct placement_cond *c = &d->cond[PL_C4];

	if (c->state == PL_COND_NO_DATA || isnan(c->lhs)) {
		append(buf, len, pos, "C4 not evaluable (no store counts)");
		return;
	}
	append(buf, len, pos, "C4: f_store %.2f %s σ %.2f", c->lhs, cmp_text(c, ">=", "<"), c->rhs);
}

/* " [marginal: within the measured noise of T_ctx (C1, ±1.20 us)]", for the conditions that can
 * change the side. */
static void reason_marginal(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	static const char *const threshold[PL_N_COND] = { "T_ctx", "N_core", "θ", "σ" };
	const char *sep = "";

	append(buf, len, pos, " [marginal: within the measured noise of ");
	for (int c = 0; c < PL_N_COND; c++) {
		double noise = d->cond[c].noise;
		char v[32];

		if (!(d->marginal_on & 1u << c))
			continue;
		if (c == PL_C1)
			fmt_seconds(v, sizeof v, noise);
		else if (c == PL_C3)
			snprintf(v, sizeof v, "%.2f GB/s", noise / 1e9);
		else
			snprintf(v, sizeof v, "%.3f", noise);
		append(buf, len, pos, "%s%s (C%d, ±%s)", sep, threshold[c], c + 1, v);
		sep = " and ";
	}
	append(buf, len, pos, "]");
}

int placement_format_reason(const struct placement_decision *d, char *buf, size_t len)
{
	const struct placement_cond *c = d->cond;
	size_t pos = 0;

	if (len > 0)
		buf[0] = '\0';
	if (c[PL_C1].state != PL_COND_TRUE || c[PL_C2].state != PL_COND_TRUE) {
		bool both = c[PL_C1].state != PL_COND_TRUE && c[PL_C2].state != PL_COND_TRUE;
		if (c[PL_C1].state != PL_COND_TRUE) {
			char a[32], b[32];
			fmt_seconds(a, sizeof a, c[PL_C1].lhs);
			fmt_seconds(b, sizeof b, c[PL_C1].rhs);
			append(buf, len, &pos, "C1: T_host %s <= T_ctx + N_total·I_min/(N_core·f_pim) %s", a, b);
		}
		if (c[PL_C2].state != PL_COND_TRUE)
			append(buf, len, &pos, "%sC2: N_par %.0f < N_core %.0f", both ? "; " : "",
			       c[PL_C2].lhs, c[PL_C2].rhs);
		append(buf, len, &pos, "; Stage 2 not evaluated");
	} else if (d->side == PL_PIM) {
		if (c[PL_C3].state == PL_COND_TRUE) {
			reason_c3(d, buf, len, &pos);
			if (c[PL_C4].state == PL_COND_TRUE) {
				append(buf, len, &pos, "; ");
				reason_c4(d, buf, len, &pos);
			}
		} else {
			reason_c4(d, buf, len, &pos);
			append(buf, len, &pos, "; ");
			reason_c3(d, buf, len, &pos);
		}
	} else {
		append(buf, len, &pos, "Stage 2 failed: ");
		reason_c3(d, buf, len, &pos);
		append(buf, len, &pos, "; ");
		reason_c4(d, buf, len, &pos);
	}
	if (d->marginal)
		reason_marginal(d, buf, len, &pos);
	if (d->evidence == PL_EVIDENCE_NONE && d->side == PL_HOST)
		append(buf, len, &pos, " [no measurements]");
	if (d->unit_size > 1)
		append(buf, len, &pos, " [operator group of %zu regions]", d->unit_size);
	if (d->n_outer > 1)
		append(buf, len, &pos, " [block: 1/%llu of the nest per execution]",
		       (unsigned long long)d->n_outer);
	return (int)pos;
}
