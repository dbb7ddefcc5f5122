/* node_ops.h - the cluster layer's side of node/cluster_ops.h. */
#ifndef NX_NODE_OPS_H
#define NX_NODE_OPS_H

/* Makes the node layer reach this layer (nx_cluster_ops_set); from nx_cluster_init. */
void nx_cluster_node_ops_install(void);

#endif
