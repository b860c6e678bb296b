"""kube-scheduler's placement, modelled on v1.35's code: the simulator binds pods as a real
cluster's scheduler would, so what `elevator simulate` and `elevator tune` promise holds there.

Modules, each following the upstream files it names:
* objects: the scheduler's view of a pod (requests, defaulted requests, affinity, spreading);
* noderesources: NodeResourcesFit (filter; LeastAllocated, MostAllocated) and
  NodeResourcesBalancedAllocation;
* simple_plugins: TaintToleration, NodeAffinity, NodeUnschedulable, DefaultNormalizeScore;
* podtopologyspread: PodTopologySpread's score with the system default constraints;
* profiles: `default`, `most-allocated`, `first-fit`;
* state: the scheduler cache (NodeInfo sums, the node tree);
* framework: filters, PreScore/Score/NormalizeScore and weights; `score_nodes`, the pure entry
  point over `kubectl get -o json` objects;
* cycle: the queue and the scheduling cycle (sampling, tie-break) the simulator runs.

Left out, and why: InterPodAffinity and ImageLocality (no simulated pod has pod affinity and no
simulated node reports images, so both score 0 on every node; `score_nodes` names them in
`unmodelled` when its input has either), preemption, NodePorts and the volume plugins.
"""
