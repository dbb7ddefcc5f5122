/*
 * status.h - names of nexar_status_t values for tools that do not link the shim.
 *
 * nexarctl and nexar-run exit with a nexar_status_t and print its name; they
 * speak the control protocol directly and have no use for libnexarshim, so the
 * names live here.  Keep in step with the enum in libshim/nexar.h.
 */
#ifndef NXT_STATUS_H
#define NXT_STATUS_H

/* "NEXAR_ERR_TIMEOUT"; "status N" for values outside the enum (a static buffer). */
const char *nxt_status_name(int status);

/* Short generic text: "no daemon answers"; never NULL. */
const char *nxt_status_text(int status);

#endif /* NXT_STATUS_H */
