/*
 * certs_cmd.h - `nexarctl certs`: the cluster CA and node certificates (certs.c in
 * tools/common does the work).  It needs no daemon, so main() hands it argv
 * before parsing anything of its own.
 */
#ifndef NXC_CERTS_CMD_H
#define NXC_CERTS_CMD_H

#include <stdbool.h>
#include <stdio.h>

/* Whether the command on this command line is "certs". */
bool nxc_is_certs(int argc, char **argv);

/* Runs `nexarctl certs ...`; returns the exit status (0; 1 usage, bad input, or
 * a file that exists without --force; 9 permission denied; 10 other failure). */
int nxc_certs_main(int argc, char **argv);

/* The usage lines for main's --help. */
void nxc_certs_usage(FILE *f);

#endif /* NXC_CERTS_CMD_H */
