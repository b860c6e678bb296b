"""kube-scheduler's placement, modelled on v1.35's code: the simulator binds pods as a real
cluster's scheduler would, so what `elevator simulate` and `elevator tune` promise holds there.

Modules, each following the upstream files it names:
* objects: the scheduler's view of a pod (requests, defaulted requests, node and pod affinity,
  spreading, host ports, volume zones), from an API object or a pod record;
* noderesources: NodeResourcesFit (filter; LeastAllocated, MostAllocated,
  RequestedToCapacityRatio) and NodeResourcesBalancedAllocation;
* simple_plugins: TaintToleration, NodeAffinity, NodeUnschedulable, NodePorts, VolumeZone,
  DefaultNormalizeScore;
* interpodaffinity: InterPodAffinity (filter and score);
* podtopologyspread, podtopologyspread_filter: PodTopologySpread's score (system or List
  defaulting) and its DoNotSchedule filter;
* preemption: DefaultPreemption's victim selection and node choice;
* profiles: `default`, `most-allocated`, `first-fit`, and the options a `Profile` may set;
* state: the scheduler cache (NodeInfo sums, pods with affinity, used ports, the node tree);
* framework: filters, PreScore/Score/NormalizeScore and weights; `score_nodes`,
  `filter_nodes` (and `preemption.preempt`), the pure entry points over `kubectl get -o json`
  objects;
* cycle: the queue and the scheduling cycle (sampling, tie-break, preemption) the simulator
  runs.

Left out, and why: ImageLocality (no simulated node reports images, so it scores 0 on every
node; `score_nodes` names it in `unmodelled` when a node reports images), NodeName, and the
volume filters besides VolumeZone (VolumeRestrictions, NodeVolumeLimits, VolumeBinding).
"""
