/*
 * fuzz_peer_msg.c - libFuzzer target for the daemon-to-daemon control messages
 * (daemon/cluster/peer_msg.c over proto/peer.proto).
 *
 * Input: the bytes of one transport message as a peer daemon could send it.  The
 * envelope is decoded (proto/wire.c); a CTL body goes to nx_peer_msg_decode(), and the
 * raw input is also tried as a bare PeerMsg body.  A message the validator accepts
 * must keep every promise the modules rely on (ranks below the world size, no
 * duplicates, node ids inside the table, bounded strings, the optional per-rank pids and
 * uids as long as what they describe or absent), and must survive packing
 * and decoding again, to the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netaddr.h"
#include "peer_msg.h"
#include "wire.h"
#include "fuzz.h"


static void check_ranks(const uint32_t *v, size_t n, uint32_t limit)
{
    for (size_t i = 0; i < n; i++) {
        CHECK(v[i] < limit);
        for (size_t k = 0; k < i && n < 512; k++)
            CHECK(v[k] != v[i]);
    }
}

static void check_text(const char *s, size_t max)
{
    CHECK(s != NULL);
    CHECK(strlen(s) <= max);
}

/* The promises of an accepted message, checked independently of the validator. */
static void promises(const Nexar__PeerMsg *m)
{
    CHECK(m->version >= 1 && m->version <= NX_PEER_VERSION);
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_REGISTER: {
        const Nexar__PeerRegister *r = m->register_;
        check_text(r->job, NX_PEER_MAX_JOB);
        CHECK(r->job[0] && r->key);
        CHECK(r->world_size >= 1 && r->world_size <= NX_PEER_MAX_WORLD);
        CHECK(r->n_ranks >= 1 && r->n_ranks <= r->world_size);
        check_ranks(r->ranks, r->n_ranks, r->world_size);
        CHECK(nx_addr_valid(r->addr));
        CHECK(r->n_pids == 0 || r->n_pids == r->n_ranks); /* pids[k] is ranks[k]'s */
        break;
    }
    case NEXAR__PEER_MSG__BODY_REGISTER_REPLY: {
        const Nexar__PeerRegisterReply *r = m->register_reply;
        check_text(r->job, NX_PEER_MAX_JOB);
        check_text(r->error, NX_PEER_MAX_TEXT);
        CHECK(r->status >= 1 && r->status <= 255);
        check_ranks(r->ranks, r->n_ranks, NX_PEER_MAX_WORLD);
        break;
    }
    case NEXAR__PEER_MSG__BODY_RANK_TABLE: {
        const Nexar__PeerRankTable *t = m->rank_table;
        check_text(t->job, NX_PEER_MAX_JOB);
        CHECK(t->n_nodes >= 1 && t->n_nodes <= NX_PEER_MAX_NODES);
        CHECK(t->node < t->n_nodes);
        for (size_t i = 0; i < t->n_nodes; i++)
            CHECK(nx_addr_valid(t->nodes[i]));
        for (size_t i = 0; i < t->n_rank_node; i++)
            CHECK(t->rank_node[i] < t->n_nodes);
        /* rank_pid[r] and rank_uid[r] are world rank r's, like rank_node[r] */
        CHECK(t->n_rank_pid == 0 || t->n_rank_pid == t->n_rank_node);
        CHECK(t->n_rank_uid == 0 || t->n_rank_uid == t->n_rank_node);
        break;
    }
    case NEXAR__PEER_MSG__BODY_ABORT:
        check_text(m->abort->job, NX_PEER_MAX_JOB);
        check_text(m->abort->reason, NX_PEER_MAX_TEXT);
        CHECK(m->abort->status >= 1 && m->abort->status <= 255);
        CHECK(m->abort->n_failed_ranks == 0 || m->abort->comm != 0);
        for (size_t i = 1; i < m->abort->n_failed_ranks; i++)
            CHECK(m->abort->failed_ranks[i] > m->abort->failed_ranks[i - 1]);
        break;
    case NEXAR__PEER_MSG__BODY_SHRINK:
        check_text(m->shrink->job, NX_PEER_MAX_JOB);
        CHECK(m->shrink->comm && m->shrink->key && m->shrink->node < NX_PEER_MAX_NODES);
        CHECK(m->shrink->decide == (m->shrink->new_key != 0));
        for (size_t i = 0; i < m->shrink->n_failed_ranks; i++)
            CHECK(m->shrink->failed_ranks[i] < NX_PEER_MAX_WORLD &&
                  (!i || m->shrink->failed_ranks[i] > m->shrink->failed_ranks[i - 1]));
        break;
    case NEXAR__PEER_MSG__BODY_GROW: {
        const Nexar__PeerGrow *g = m->grow;
        check_text(g->job, NX_PEER_MAX_JOB);
        check_text(g->error, NX_PEER_MAX_TEXT);
        CHECK(g->comm && g->key && g->node < NX_PEER_MAX_NODES);
        CHECK(g->add <= NX_PEER_MAX_WORLD);
        for (size_t i = 0; i < g->n_job_node; i++)
            CHECK(g->job_node[i] < NX_PEER_MAX_NODES);
        CHECK(g->status == 0 || (g->status >= 1 && g->status <= 255));
        if (g->decide && g->status == 0)
            CHECK(g->new_key != 0 && g->members > 0 && g->n_job_node > g->members);
        break;
    }
    case NEXAR__PEER_MSG__BODY_HELLO:
        CHECK(nx_addr_valid(m->hello->addr));
        break;
    case NEXAR__PEER_MSG__BODY_TEST_BEGIN:
        CHECK(m->test_begin->channel < m->test_begin->channels);
        CHECK(m->test_begin->channels <= NX_PEERTEST_MAX_STREAMS);
        break;
    case NEXAR__PEER_MSG__BODY_TEST_END:
        CHECK(m->test_end->channel < NX_PEERTEST_MAX_STREAMS);
        break;
    case NEXAR__PEER_MSG__BODY_TEST_RESULT:
        CHECK(m->test_result->bad_channel < NX_PEERTEST_MAX_STREAMS);
        check_text(m->test_result->error, NX_PEER_MAX_TEXT);
        break;
    case NEXAR__PEER_MSG__BODY_SPLIT:
        check_text(m->split->job, NX_PEER_MAX_JOB);
        CHECK(m->split->n_ranks == m->split->n_colors && m->split->n_ranks == m->split->n_keys);
        check_ranks(m->split->ranks, m->split->n_ranks, NX_PEER_MAX_WORLD);
        CHECK(m->split->node < NX_PEER_MAX_NODES && m->split->comm != 0);
        break;
    case NEXAR__PEER_MSG__BODY_JOINER:
        check_text(m->joiner->job, NX_PEER_MAX_JOB);
        CHECK(nx_addr_valid(m->joiner->addr) && m->joiner->key);
        break;
    case NEXAR__PEER_MSG__BODY_JOINER_TABLE:
        check_text(m->joiner_table->job, NX_PEER_MAX_JOB);
        CHECK(m->joiner_table->node < m->joiner_table->n_nodes);
        for (size_t i = 0; i < m->joiner_table->n_nodes; i++)
            CHECK(nx_addr_valid(m->joiner_table->nodes[i]));
        break;
    case NEXAR__PEER_MSG__BODY_JOINER_NOTE:
        check_text(m->joiner_note->job, NX_PEER_MAX_JOB);
        CHECK(nx_addr_valid(m->joiner_note->addr));
        break;
    default:
        CHECK(!"accepted a message without a body");
    }
}

static void body(const uint8_t *p, size_t n)
{
    const char *why = NULL;
    Nexar__PeerMsg *m = nx_peer_msg_decode(p, n, &why);
    if (!m) {
        CHECK(why != NULL);
        return;
    }
    promises(m);
    size_t len1, len2;
    uint8_t *a = nx_peer_msg_pack(m, &len1);
    struct nx_wire_msg w;
    CHECK(nx_wire_decode(a, len1, &w, &why) == 0);
    CHECK(w.type == NX_WIRE_CTL);
    Nexar__PeerMsg *m2 = nx_peer_msg_decode(w.body, w.body_len, &why);
    CHECK(m2 != NULL);
    uint8_t *b = nx_peer_msg_pack(m2, &len2);
    CHECK(len1 == len2 && memcmp(a, b, len1) == 0);
    free(a);
    free(b);
    nx_peer_msg_free(m2);
    nx_peer_msg_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nx_wire_msg w;
    const char *why = NULL;
    if (nx_wire_decode(data, size, &w, &why) == 0 && w.type == NX_WIRE_CTL)
        body(w.body, w.body_len);
    body(data, size);
    return 0;
}
