"""Go's named string types, by the struct field that carries them, for the decoder's words.

encoding/json prints a field's Go type as reflect does: a named type by its name
(`v1.RestartPolicy`), not its underlying `string`. The protobuf descriptors the fake is built
from (protobuf_schema_*.py) carry only the wire type, and no maintained source the project can
depend on carries the Go names: the OpenAPI documents and the `kubernetes` client's models
know the JSON types and enums only. So this table is kept by hand, for the named string types
of the kinds the fake serves; each entry is `alias.Struct.jsonField` as declared in
k8s.io/api <group>/v1/types.go (core, apps, coordination, policy), k8s.io/apimachinery
pkg/apis/meta/v1/types.go (metav1) and k8s.io/apiextensions-apiserver
pkg/apis/apiextensions/v1/types.go. Named map types (`v1.ResourceList`) are not kept here.
"""

from __future__ import annotations

# Go type -> the fields declared with it (a pointer or a slice of it prints the same element
# name for an element's error, `[]v1.Capability` for the slice's own).
_DECLARED: dict[str, tuple[str, ...]] = {
    # k8s.io/api core/v1/types.go
    "v1.AppArmorProfileType": ("core.AppArmorProfile.type",),
    "v1.AzureDataDiskCachingMode": ("core.AzureDiskVolumeSource.cachingMode",),
    "v1.AzureDataDiskKind": ("core.AzureDiskVolumeSource.kind",),
    "v1.Capability": ("core.Capabilities.add", "core.Capabilities.drop"),
    "v1.ConditionStatus": (
        "core.NamespaceCondition.status", "core.NodeCondition.status",
        "core.PersistentVolumeClaimCondition.status", "core.PodCondition.status",
        # apps/v1/types.go's conditions use core/v1's ConditionStatus
        "apps.DaemonSetCondition.status", "apps.DeploymentCondition.status",
        "apps.ReplicaSetCondition.status", "apps.StatefulSetCondition.status",
        # metav1.Condition and apiextensions' own ConditionStatus print the same
        "meta.Condition.status", "apiextensions.CustomResourceDefinitionCondition.status"),
    "v1.ContainerRestartPolicy": ("core.Container.restartPolicy",
                                  "core.EphemeralContainerCommon.restartPolicy"),
    "v1.ContainerRestartRuleAction": ("core.ContainerRestartRule.action",),
    "v1.ContainerRestartRuleOnExitCodesOperator": ("core.ContainerRestartRuleOnExitCodes.operator",),
    "v1.DNSPolicy": ("core.PodSpec.dnsPolicy",),
    "v1.FinalizerName": ("core.NamespaceSpec.finalizers",),
    "v1.GRPCProbeMode": ("core.GRPCAction.mode",),
    "v1.HTTPProtocol": ("core.HTTPGetAction.protocol",),
    "v1.HostPathType": ("core.HostPathVolumeSource.type",),
    "v1.IPFamily": ("core.ServiceSpec.ipFamilies",),
    "v1.IPFamilyPolicy": ("core.ServiceSpec.ipFamilyPolicy",),
    "v1.LoadBalancerIPMode": ("core.LoadBalancerIngress.ipMode",),
    "v1.MountPropagationMode": ("core.VolumeMount.mountPropagation",),
    "v1.NamespaceConditionType": ("core.NamespaceCondition.type",),
    "v1.NamespacePhase": ("core.NamespaceStatus.phase",),
    "v1.NodeAddressType": ("core.NodeAddress.type",),
    "v1.NodeConditionType": ("core.NodeCondition.type",),
    "v1.NodeInclusionPolicy": ("core.TopologySpreadConstraint.nodeAffinityPolicy",
                               "core.TopologySpreadConstraint.nodeTaintsPolicy"),
    "v1.NodePhase": ("core.NodeStatus.phase",),
    "v1.NodeSelectorOperator": ("core.NodeSelectorRequirement.operator",),
    "v1.OSName": ("core.PodOS.name",),
    "v1.PersistentVolumeAccessMode": ("core.PersistentVolumeClaimSpec.accessModes",
                                      "core.PersistentVolumeClaimStatus.accessModes",
                                      "core.PersistentVolumeSpec.accessModes"),
    "v1.PersistentVolumeClaimConditionType": ("core.PersistentVolumeClaimCondition.type",),
    "v1.PersistentVolumeClaimModifyVolumeStatus": ("core.ModifyVolumeStatus.status",),
    "v1.PersistentVolumeClaimPhase": ("core.PersistentVolumeClaimStatus.phase",),
    "v1.PersistentVolumeMode": ("core.PersistentVolumeClaimSpec.volumeMode",
                                "core.PersistentVolumeSpec.volumeMode"),
    "v1.PersistentVolumePhase": ("core.PersistentVolumeStatus.phase",),
    "v1.PersistentVolumeReclaimPolicy": ("core.PersistentVolumeSpec.persistentVolumeReclaimPolicy",),
    "v1.PodConditionType": ("core.PodCondition.type", "core.PodReadinessGate.conditionType"),
    "v1.PodFSGroupChangePolicy": ("core.PodSecurityContext.fsGroupChangePolicy",),
    "v1.PodPhase": ("core.PodStatus.phase",),
    "v1.PodQOSClass": ("core.PodStatus.qosClass",),
    "v1.PodResizeStatus": ("core.PodStatus.resize",),
    "v1.PodSELinuxChangePolicy": ("core.PodSecurityContext.seLinuxChangePolicy",),
    "v1.PreemptionPolicy": ("core.PodSpec.preemptionPolicy",),
    "v1.ProcMountType": ("core.SecurityContext.procMount",),
    "v1.Protocol": ("core.ContainerPort.protocol", "core.PortStatus.protocol",
                    "core.ServicePort.protocol"),
    "v1.PullPolicy": ("core.Container.imagePullPolicy",
                      "core.EphemeralContainerCommon.imagePullPolicy",
                      "core.ImageVolumeSource.pullPolicy"),
    "v1.RecursiveReadOnlyMode": ("core.VolumeMount.recursiveReadOnly",
                                 "core.VolumeMountStatus.recursiveReadOnly"),
    "v1.ResourceHealthStatus": ("core.ResourceHealth.health",),
    "v1.ResourceID": ("core.ResourceHealth.resourceID",),
    "v1.ResourceName": ("core.ContainerResizePolicy.resourceName",
                        "core.NodeAllocatableMappedResources.name",
                        "core.NodeAllocatableOverheadResources.name", "core.ResourceStatus.name"),
    "v1.ResourceResizeRestartPolicy": ("core.ContainerResizePolicy.restartPolicy",),
    "v1.RestartPolicy": ("core.PodSpec.restartPolicy",),
    "v1.SeccompProfileType": ("core.SeccompProfile.type",),
    "v1.SecretType": ("core.Secret.type",),
    "v1.ServiceAffinity": ("core.ServiceSpec.sessionAffinity",),
    "v1.ServiceExternalTrafficPolicy": ("core.ServiceSpec.externalTrafficPolicy",),
    "v1.ServiceInternalTrafficPolicy": ("core.ServiceSpec.internalTrafficPolicy",),
    "v1.ServiceType": ("core.ServiceSpec.type",),
    "v1.Signal": ("core.ContainerStatus.stopSignal", "core.Lifecycle.stopSignal"),
    "v1.StorageMedium": ("core.EmptyDirVolumeSource.medium",),
    "v1.SupplementalGroupsPolicy": ("core.PodSecurityContext.supplementalGroupsPolicy",),
    "v1.TaintEffect": ("core.Taint.effect", "core.Toleration.effect"),
    "v1.TerminationMessagePolicy": ("core.Container.terminationMessagePolicy",
                                    "core.EphemeralContainerCommon.terminationMessagePolicy"),
    "v1.TolerationOperator": ("core.Toleration.operator",),
    "v1.URIScheme": ("core.HTTPGetAction.scheme",),
    "v1.UniqueVolumeName": ("core.AttachedVolume.name", "core.NodeStatus.volumesInUse"),
    "v1.UnsatisfiableConstraintAction": ("core.TopologySpreadConstraint.whenUnsatisfiable",),
    "v1.VolumeHealthStatusType": ("core.VolumeHealthCondition.status",),
    # k8s.io/api apps/v1/types.go
    "v1.DaemonSetConditionType": ("apps.DaemonSetCondition.type",),
    "v1.DaemonSetUpdateStrategyType": ("apps.DaemonSetUpdateStrategy.type",),
    "v1.DeploymentConditionType": ("apps.DeploymentCondition.type",),
    "v1.DeploymentStrategyType": ("apps.DeploymentStrategy.type",),
    "v1.PersistentVolumeClaimRetentionPolicyType": (
        "apps.StatefulSetPersistentVolumeClaimRetentionPolicy.whenDeleted",
        "apps.StatefulSetPersistentVolumeClaimRetentionPolicy.whenScaled"),
    "v1.PodManagementPolicyType": ("apps.StatefulSetSpec.podManagementPolicy",),
    "v1.ReplicaSetConditionType": ("apps.ReplicaSetCondition.type",),
    "v1.StatefulSetConditionType": ("apps.StatefulSetCondition.type",),
    "v1.StatefulSetUpdateStrategyType": ("apps.StatefulSetUpdateStrategy.type",),
    # k8s.io/api coordination/v1/types.go, policy/v1/types.go
    "v1.CoordinatedLeaseStrategy": ("coordination.LeaseSpec.strategy",),
    "v1.UnhealthyPodEvictionPolicyType": ("policy.PodDisruptionBudgetSpec.unhealthyPodEvictionPolicy",),
    # k8s.io/apimachinery pkg/apis/meta/v1/types.go (UID is k8s.io/apimachinery/pkg/types)
    "types.UID": ("meta.ObjectMeta.uid", "meta.OwnerReference.uid", "meta.Preconditions.uid"),
    "v1.DeletionPropagation": ("meta.DeleteOptions.propagationPolicy",),
    "v1.LabelSelectorOperator": ("meta.LabelSelectorRequirement.operator",),
    "v1.ManagedFieldsOperationType": ("meta.ManagedFieldsEntry.operation",),
    "v1.StatusReason": ("meta.Status.reason",),
    "v1.CauseType": ("meta.StatusCause.reason",),
    # k8s.io/apiextensions-apiserver pkg/apis/apiextensions/v1/types.go
    "v1.ResourceScope": ("apiextensions.CustomResourceDefinitionSpec.scope",),
    "v1.ConversionStrategyType": ("apiextensions.CustomResourceConversion.strategy",),
    "v1.CustomResourceDefinitionConditionType": (
        "apiextensions.CustomResourceDefinitionCondition.type",),
    "v1.FieldValueErrorReason": ("apiextensions.ValidationRule.reason",),
}

GO_NAMED: dict[tuple[str, str], str] = {
    (declared.rpartition(".")[0], declared.rpartition(".")[2]): go_type
    for go_type, fields in _DECLARED.items() for declared in fields}
"""(`alias.Struct`, JSON field name) -> the Go named type reflect prints for it."""

__all__ = ["GO_NAMED"]
