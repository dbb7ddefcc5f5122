/*
 * xcoll.h - the parts of the cross-node rank program (xcoll_rank.c, xcoll_p2p.c,
 * xcoll_split.c, xcoll_soak.c), and where the ranks are.
 *
 * The rank program cannot ask the library which node it is on (the API has no such
 * call), so the test that starts it says: $XC_PLACE is the node of every world rank,
 * comma-separated ("0,1,0,1": ranks 0 and 2 on node 0); without it the ranks are in
 * blocks of $XC_NODES nodes as nexar-run --nodes places them (rank r on node r*K/N).
 */
#ifndef ITEST_XCOLL_H
#define ITEST_XCOLL_H

#include "nexar.h"

#define XC_MAX 16

struct xc_place {
    int size;         /* world size */
    int nodes;        /* K */
    int node[XC_MAX]; /* world rank -> node index */
};

/* Reads the placement from the environment; 0, or -1 after printing why. */
int xc_place_init(struct xc_place *p, int size);
/* "0,1,0,1" */
void xc_place_str(const struct xc_place *p, char *out, size_t len);
/* Position of r among the ranks of its node (in rank order), their number. */
int xc_local_index(const struct xc_place *p, int r);
int xc_local_count(const struct xc_place *p, int node);
/* The rank of r's local index on the next node (wrapping): with K >= 2 always on
 * another node.  With one node, r + 1 (mod size).  xc_prev is its inverse. */
int xc_next(const struct xc_place *p, int r);
int xc_prev(const struct xc_place *p, int r);

/* The parts; each returns the number of failed checks (0: all passed).  Every rank of
 * the world calls them in the same order. */
int xc_p2p(nexar_comm_t *w, const struct xc_place *p);
int xc_split(nexar_comm_t *w, const struct xc_place *p);
int xc_soak(nexar_comm_t *w, const struct xc_place *p);
int xc_tsoak(nexar_comm_t *w, const struct xc_place *p);

#endif /* ITEST_XCOLL_H */
