/* peer_msg.c - see peer_msg.h. */
#include "peer_msg.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "netaddr.h"
#include "wire.h"

#define REJECT(reason)                                                                     \
    do {                                                                                   \
        *why = (reason);                                                                   \
        return false;                                                                      \
    } while (0)

/* Bytes a log line or an error message may carry as they are: no control characters
 * (UTF-8 above 0x7f passes; the tools escape it). */
static bool text_ok(const char *s, size_t max)
{
    if (!s)
        return false;
    size_t n = strnlen(s, max + 1);
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* A job name as job.c accepts it from a rank: 1-255 printable ASCII characters. */
static bool job_ok(const char *s)
{
    if (!s || !*s)
        return false;
    size_t n = strnlen(s, NX_PEER_MAX_JOB + 1);
    if (n > NX_PEER_MAX_JOB)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e)
            return false;
    return true;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* n values, each below limit, none twice. */
static bool distinct_below(const uint32_t *v, size_t n, uint32_t limit)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] >= limit)
            return false;
    if (n < 2)
        return true;
    uint32_t *s = nx_xmalloc(n * sizeof(*s));
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u32);
    bool ok = true;
    for (size_t i = 1; i < n && ok; i++)
        ok = s[i] != s[i - 1];
    free(s);
    return ok;
}

static bool status_ok(uint32_t st)
{
    return st >= 1 && st <= 255;
}

static bool check_register(const Nexar__PeerRegister *r, const char **why)
{
    if (!job_ok(r->job))
        REJECT("register: job name not 1-255 printable characters");
    if (r->key == 0)
        REJECT("register: key is 0");
    if (r->world_size == 0 || r->world_size > NX_PEER_MAX_WORLD)
        REJECT("register: world size out of range");
    if (r->n_ranks == 0 || r->n_ranks > r->world_size)
        REJECT("register: rank count out of range");
    if (!distinct_below(r->ranks, r->n_ranks, r->world_size))
        REJECT("register: rank out of range or listed twice");
    if (!nx_addr_valid(r->addr))
        REJECT("register: address is not host:port");
    if (r->version == 0 || r->version > NX_PEER_VERSION)
        REJECT("register: unsupported peer protocol version");
    if (r->timeout_ms > 7u * 86400u * 1000u)
        REJECT("register: timeout beyond a week");
    if (!text_ok(r->algo, NX_PEER_MAX_ALGO))
        REJECT("register: algorithm choices too long or not printable");
    if (r->n_pids != 0 && r->n_pids != r->n_ranks)
        REJECT("register: pid count differs from the rank count");
    return true;
}

static bool check_register_reply(const Nexar__PeerRegisterReply *r, const char **why)
{
    if (!job_ok(r->job))
        REJECT("register reply: job name not 1-255 printable characters");
    if (r->key == 0)
        REJECT("register reply: key is 0");
    if (r->n_ranks == 0 || r->n_ranks > NX_PEER_MAX_WORLD)
        REJECT("register reply: rank count out of range");
    if (!distinct_below(r->ranks, r->n_ranks, NX_PEER_MAX_WORLD))
        REJECT("register reply: rank out of range or listed twice");
    if (!status_ok(r->status))
        REJECT("register reply: status not a nexar error");
    if (!text_ok(r->error, NX_PEER_MAX_TEXT))
        REJECT("register reply: error text too long or not printable");
    return true;
}

static bool check_rank_table(const Nexar__PeerRankTable *t, const char **why)
{
    if (!job_ok(t->job))
        REJECT("rank table: job name not 1-255 printable characters");
    if (t->key == 0 || t->job_key == 0)
        REJECT("rank table: key is 0");
    if (t->n_nodes == 0 || t->n_nodes > NX_PEER_MAX_NODES)
        REJECT("rank table: node count out of range");
    if (t->n_rank_node == 0 || t->n_rank_node > NX_PEER_MAX_WORLD)
        REJECT("rank table: world size out of range");
    if (t->n_nodes > t->n_rank_node)
        REJECT("rank table: more nodes than ranks");
    if (t->node >= t->n_nodes)
        REJECT("rank table: receiver's node id out of range");
    if (t->timeout_ms > 7u * 86400u * 1000u)
        REJECT("rank table: timeout beyond a week");
    if (!text_ok(t->algo, NX_PEER_MAX_ALGO))
        REJECT("rank table: algorithm choices too long or not printable");
    if ((t->n_rank_pid != 0 && t->n_rank_pid != t->n_rank_node) ||
        (t->n_rank_uid != 0 && t->n_rank_uid != t->n_rank_node))
        REJECT("rank table: pid or uid count differs from the world size");
    for (size_t i = 0; i < t->n_nodes; i++)
        if (!nx_addr_valid(t->nodes[i]))
            REJECT("rank table: node address is not host:port");
    for (size_t i = 1; i < t->n_nodes; i++)
        for (size_t k = 0; k < i; k++)
            if (!strcmp(t->nodes[i], t->nodes[k]))
                REJECT("rank table: node listed twice");
    /* Every node hosts a rank: a table of idle nodes is not one a coordinator makes. */
    uint8_t *used = nx_xcalloc(t->n_nodes, 1);
    bool ok = true;
    for (size_t r = 0; r < t->n_rank_node && ok; r++) {
        if (t->rank_node[r] >= t->n_nodes)
            ok = false;
        else
            used[t->rank_node[r]] = 1;
    }
    for (size_t i = 0; i < t->n_nodes && ok; i++)
        ok = used[i];
    free(used);
    if (!ok)
        REJECT("rank table: rank on a node not in the table, or a node without ranks");
    return true;
}

static bool check_abort(const Nexar__PeerAbort *a, const char **why)
{
    if (!job_ok(a->job))
        REJECT("abort: job name not 1-255 printable characters");
    if (a->key == 0)
        REJECT("abort: key is 0");
    if (!status_ok(a->status))
        REJECT("abort: status not a nexar error");
    if (!text_ok(a->reason, NX_PEER_MAX_TEXT))
        REJECT("abort: reason too long or not printable");
    if (a->left && a->comm == 0)
        REJECT("abort: a rank that left names no communicator");
    if (a->n_failed_ranks > NX_PEER_MAX_WORLD || (a->n_failed_ranks && a->comm == 0))
        REJECT("abort: failed ranks without a communicator, or too many");
    for (size_t i = 0; i < a->n_failed_ranks; i++)
        if (a->failed_ranks[i] >= NX_PEER_MAX_WORLD ||
            (i && a->failed_ranks[i] <= a->failed_ranks[i - 1]))
            REJECT("abort: failed ranks out of range or not ascending");
    return true;
}

static bool check_hello(const Nexar__PeerHello *h, const char **why)
{
    if (h->version == 0 || h->version > NX_PEER_VERSION)
        REJECT("hello: unsupported peer protocol version");
    if (!nx_addr_valid(h->addr))
        REJECT("hello: address is not host:port");
    return true;
}

static bool check_test_begin(const Nexar__PeerTestBegin *b, const char **why)
{
    if (b->channels == 0 || b->channels > NX_PEERTEST_MAX_STREAMS)
        REJECT("test begin: channel count out of range");
    if (b->channel >= b->channels)
        REJECT("test begin: channel out of range");
    if (b->bytes > NX_PEERTEST_MAX_BYTES)
        REJECT("test begin: byte count out of range");
    return true;
}

static bool check_test_end(const Nexar__PeerTestEnd *e, const char **why)
{
    if (e->channel >= NX_PEERTEST_MAX_STREAMS)
        REJECT("test end: channel out of range");
    if (e->bytes > NX_PEERTEST_MAX_BYTES)
        REJECT("test end: byte count out of range");
    if (e->msgs > e->bytes + 1)
        REJECT("test end: more messages than bytes");
    return true;
}

static bool check_test_result(const Nexar__PeerTestResult *r, const char **why)
{
    if (r->status > 255)
        REJECT("test result: status not a nexar status");
    if (r->bad_channel >= NX_PEERTEST_MAX_STREAMS)
        REJECT("test result: channel out of range");
    if (r->bytes > NX_PEERTEST_MAX_BYTES)
        REJECT("test result: byte count out of range");
    if (!text_ok(r->error, NX_PEER_MAX_TEXT))
        REJECT("test result: error text too long or not printable");
    return true;
}

/* Unknown fields are kept for forward compatibility, but field number 0 does not exist:
 * protobuf-c lets a long-encoded tag 0 through, and would write it back as one it refuses. */
static bool unknown_ok(const ProtobufCMessage *b)
{
    for (unsigned i = 0; i < b->n_unknown_fields; i++)
        if (b->unknown_fields[i].tag == 0)
            return false;
    return true;
}

/* The body's base (its first member), NULL when the oneof is unset or empty. */
static const ProtobufCMessage *body_of(const Nexar__PeerMsg *m)
{
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_REGISTER: return (const ProtobufCMessage *)m->register_;
    case NEXAR__PEER_MSG__BODY_REGISTER_REPLY: return (const ProtobufCMessage *)m->register_reply;
    case NEXAR__PEER_MSG__BODY_RANK_TABLE: return (const ProtobufCMessage *)m->rank_table;
    case NEXAR__PEER_MSG__BODY_ABORT: return (const ProtobufCMessage *)m->abort;
    case NEXAR__PEER_MSG__BODY_HELLO: return (const ProtobufCMessage *)m->hello;
    case NEXAR__PEER_MSG__BODY_TEST_BEGIN: return (const ProtobufCMessage *)m->test_begin;
    case NEXAR__PEER_MSG__BODY_TEST_END: return (const ProtobufCMessage *)m->test_end;
    case NEXAR__PEER_MSG__BODY_TEST_RESULT: return (const ProtobufCMessage *)m->test_result;
    case NEXAR__PEER_MSG__BODY_SPLIT: return (const ProtobufCMessage *)m->split;
    case NEXAR__PEER_MSG__BODY_SHRINK: return (const ProtobufCMessage *)m->shrink;
    case NEXAR__PEER_MSG__BODY_GROW: return (const ProtobufCMessage *)m->grow;
    case NEXAR__PEER_MSG__BODY_JOINER: return (const ProtobufCMessage *)m->joiner;
    case NEXAR__PEER_MSG__BODY_JOINER_TABLE: return (const ProtobufCMessage *)m->joiner_table;
    case NEXAR__PEER_MSG__BODY_JOINER_NOTE: return (const ProtobufCMessage *)m->joiner_note;
    default: return NULL;
    }
}

static bool check_split(const Nexar__PeerSplit *x, const char **why)
{
    if (!job_ok(x->job))
        REJECT("split: job name not 1-255 printable characters");
    if (x->key == 0)
        REJECT("split: key is 0");
    if (x->comm == 0)
        REJECT("split: communicator key is 0");
    if (x->node >= NX_PEER_MAX_NODES)
        REJECT("split: node id out of range");
    if (x->n_ranks == 0 || x->n_ranks > NX_PEER_MAX_WORLD || x->n_colors != x->n_ranks ||
        x->n_keys != x->n_ranks)
        REJECT("split: rank, color and key counts differ or are out of range");
    if (!distinct_below(x->ranks, x->n_ranks, NX_PEER_MAX_WORLD))
        REJECT("split: rank out of range or listed twice");
    return true;
}

static bool check_shrink(const Nexar__PeerShrink *x, const char **why)
{
    if (!job_ok(x->job))
        REJECT("shrink: job name not 1-255 printable characters");
    if (x->key == 0 || x->comm == 0)
        REJECT("shrink: job or communicator key is 0");
    if (x->node >= NX_PEER_MAX_NODES)
        REJECT("shrink: node id out of range");
    if (x->n_failed_ranks > NX_PEER_MAX_WORLD)
        REJECT("shrink: too many failed ranks");
    for (size_t i = 0; i < x->n_failed_ranks; i++)
        if (x->failed_ranks[i] >= NX_PEER_MAX_WORLD ||
            (i && x->failed_ranks[i] <= x->failed_ranks[i - 1]))
            REJECT("shrink: failed ranks out of range or not ascending");
    if (x->decide != (x->new_key != 0))
        REJECT("shrink: a decision needs a new key, and only a decision has one");
    return true;
}

static bool check_grow(const Nexar__PeerGrow *x, const char **why)
{
    if (!job_ok(x->job))
        REJECT("grow: job name not 1-255 printable characters");
    if (x->key == 0 || x->comm == 0)
        REJECT("grow: job or communicator key is 0");
    if (x->node >= NX_PEER_MAX_NODES)
        REJECT("grow: node id out of range");
    if (x->add > NX_PEER_MAX_WORLD || x->joiners > NX_PEER_MAX_WORLD ||
        x->nranks > 2 * NX_PEER_MAX_WORLD || x->first_rank > 2 * NX_PEER_MAX_WORLD)
        REJECT("grow: a count out of range");
    if (x->n_job_node > 2 * NX_PEER_MAX_WORLD)
        REJECT("grow: too many ranks");
    for (size_t i = 0; i < x->n_job_node; i++)
        if (x->job_node[i] >= NX_PEER_MAX_NODES)
            REJECT("grow: a node id out of range");
    if (x->decide && x->status == 0 &&
        (x->new_key == 0 || x->members == 0 || x->n_job_node <= x->members))
        REJECT("grow: a decision without a key, members or joiners");
    if (x->status && !status_ok(x->status))
        REJECT("grow: status not a nexar error");
    if (!text_ok(x->error, NX_PEER_MAX_TEXT))
        REJECT("grow: error too long or not printable");
    return true;
}

static bool check_joiner(const Nexar__PeerJoiner *x, const char **why)
{
    if (!job_ok(x->job) || x->key == 0)
        REJECT("joiner: job name not 1-255 printable characters, or key 0");
    if (!nx_addr_valid(x->addr))
        REJECT("joiner: address is not host:port");
    if (x->version == 0 || x->version > NX_PEER_VERSION)
        REJECT("joiner: unsupported peer protocol version");
    if (x->joiners > NX_PEER_MAX_WORLD)
        REJECT("joiner: too many joiners");
    return true;
}

static bool check_joiner_table(const Nexar__PeerJoinerTable *t, const char **why)
{
    if (!job_ok(t->job) || t->key == 0 || t->job_key == 0)
        REJECT("joiner table: job name not 1-255 printable characters, or key 0");
    if (t->n_nodes == 0 || t->n_nodes > NX_PEER_MAX_NODES || t->node >= t->n_nodes)
        REJECT("joiner table: node count or index out of range");
    for (size_t i = 0; i < t->n_nodes; i++)
        if (!nx_addr_valid(t->nodes[i]))
            REJECT("joiner table: a node address is not host:port");
    if (!text_ok(t->algo, NX_PEER_MAX_ALGO))
        REJECT("joiner table: algorithm choices too long or not printable");
    return true;
}

static bool check_joiner_note(const Nexar__PeerJoinerNote *x, const char **why)
{
    if (!job_ok(x->job) || x->key == 0)
        REJECT("joiner note: job name not 1-255 printable characters, or key 0");
    if (x->node >= NX_PEER_MAX_NODES || !nx_addr_valid(x->addr))
        REJECT("joiner note: node id out of range, or address not host:port");
    if (x->joiners > NX_PEER_MAX_WORLD)
        REJECT("joiner note: too many joiners");
    return true;
}

static bool check(const Nexar__PeerMsg *m, const char **why)
{
    if (!unknown_ok(&m->base) || !unknown_ok(body_of(m)))
        REJECT("a field numbered 0");
    if (m->version == 0 || m->version > NX_PEER_VERSION)
        REJECT("unsupported peer protocol version");
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_REGISTER: return check_register(m->register_, why);
    case NEXAR__PEER_MSG__BODY_REGISTER_REPLY:
        return check_register_reply(m->register_reply, why);
    case NEXAR__PEER_MSG__BODY_RANK_TABLE: return check_rank_table(m->rank_table, why);
    case NEXAR__PEER_MSG__BODY_ABORT: return check_abort(m->abort, why);
    case NEXAR__PEER_MSG__BODY_HELLO: return check_hello(m->hello, why);
    case NEXAR__PEER_MSG__BODY_TEST_BEGIN: return check_test_begin(m->test_begin, why);
    case NEXAR__PEER_MSG__BODY_TEST_END: return check_test_end(m->test_end, why);
    case NEXAR__PEER_MSG__BODY_TEST_RESULT: return check_test_result(m->test_result, why);
    case NEXAR__PEER_MSG__BODY_SPLIT: return check_split(m->split, why);
    case NEXAR__PEER_MSG__BODY_SHRINK: return check_shrink(m->shrink, why);
    case NEXAR__PEER_MSG__BODY_GROW: return check_grow(m->grow, why);
    case NEXAR__PEER_MSG__BODY_JOINER: return check_joiner(m->joiner, why);
    case NEXAR__PEER_MSG__BODY_JOINER_TABLE: return check_joiner_table(m->joiner_table, why);
    case NEXAR__PEER_MSG__BODY_JOINER_NOTE: return check_joiner_note(m->joiner_note, why);
    default: REJECT("no message body");
    }
}

Nexar__PeerMsg *nx_peer_msg_decode(const uint8_t *buf, size_t len, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (len > NX_PEER_MAX_MSG) {
        *why = "control message larger than 16 MiB";
        return NULL;
    }
    Nexar__PeerMsg *m = nexar__peer_msg__unpack(NULL, len, buf);
    if (!m) {
        *why = "control message does not decode";
        return NULL;
    }
    /* The oneof's sub-message pointers are set exactly when its case is: protobuf-c
     * guarantees it, but a NULL here would be a crash, so check. */
    const ProtobufCMessage *body = body_of(m);
    if (!body) {
        *why = "control message without a body";
        nexar__peer_msg__free_unpacked(m, NULL);
        return NULL;
    }
    if (!check(m, why)) {
        nexar__peer_msg__free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

void nx_peer_msg_free(Nexar__PeerMsg *m)
{
    if (m)
        nexar__peer_msg__free_unpacked(m, NULL);
}

uint8_t *nx_peer_msg_pack(Nexar__PeerMsg *m, size_t *len)
{
    m->version = NX_PEER_VERSION;
    size_t body = nexar__peer_msg__get_packed_size(m);
    uint8_t *buf = nx_xmalloc(NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES + body);
    size_t env = nx_wire_put_ctl(buf);
    nexar__peer_msg__pack(m, buf + env);
    *len = env + body;
    return buf;
}
