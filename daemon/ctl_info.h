/* ctl_info.h - answers nexarctl: status, jobs, communicators, in-flight ops, counters. */
#ifndef NX_CTL_INFO_H
#define NX_CTL_INFO_H

struct nx_conn;
struct Nexar__CtlRequest;

void nx_ctl_info_reply(struct nx_conn *c, const struct Nexar__CtlRequest *req);

#endif
