/* Pod (core/v1). */
#include "api/disruption.h"
#include "base/gotime.h"
#include "api/kinds/kind.h"
#include "api/kinds/workload.h"
#include "api/quantity.h"
#include "api/scheduling.h"

/* ---- core/v1 Pod ----------------------------------------------------------------------------- */
/* Every field of the Pod of k8s.io/api v0.32 is transcribed with its number in generated.proto, so
 * that a pod (and a pod template) goes through protobuf without loss: clients that watch pods as
 * protobuf (kubectl debug, kubectl's waits) read what JSON readers read. */
STRUCT(local_ref, "LocalObjectReference", F(1, "name", S));
LIST(local_refs, NULL, local_ref);
#define label_selector kite_schema_label_selector
STRUCT(container_port, "ContainerPort", F(1, "name", S), F(2, "hostPort", I32), FR(3, "containerPort", I32), F(4, "protocol", S),
    F(5, "hostIP", S));
LIST(container_ports, NULL, container_port);
STRUCT(object_field_selector, "ObjectFieldSelector", F(1, "apiVersion", S), FR(2, "fieldPath", S));
STRUCT(resource_field_selector, "ResourceFieldSelector", F(1, "containerName", S), FR(2, "resource", S), F(3, "divisor", Q));
/* the selectors embed LocalObjectReference (inline in JSON): partial, as every struct with an inline one */
STRUCT_PARTIAL(configmap_key_selector, "ConfigMapKeySelector", FI(1, "localObjectReference", local_ref), FR(2, "key", S),
    FK(3, "optional", B));
STRUCT_PARTIAL(secret_key_selector, "SecretKeySelector", FI(1, "localObjectReference", local_ref), FR(2, "key", S),
    FK(3, "optional", B));
STRUCT(env_var_source, "EnvVarSource", F(1, "fieldRef", object_field_selector), F(2, "resourceFieldRef", resource_field_selector),
    F(3, "configMapKeyRef", configmap_key_selector), F(4, "secretKeyRef", secret_key_selector));
STRUCT(env_var, "EnvVar", FR(1, "name", S), F(2, "value", S), F(3, "valueFrom", env_var_source));
LIST(env_vars, NULL, env_var);
STRUCT_PARTIAL(configmap_env_source, "ConfigMapEnvSource", FI(1, "localObjectReference", local_ref), FK(2, "optional", B));
STRUCT_PARTIAL(secret_env_source, "SecretEnvSource", FI(1, "localObjectReference", local_ref), FK(2, "optional", B));
STRUCT(env_from_source, "EnvFromSource", F(1, "prefix", S), F(2, "configMapRef", configmap_env_source),
    F(3, "secretRef", secret_env_source));
LIST(env_from_sources, NULL, env_from_source);
STRUCT(resource_claim, "ResourceClaim", FR(1, "name", S), F(2, "request", S));
LIST(resource_claims, NULL, resource_claim);
STRUCT(resources, "ResourceRequirements", F(1, "limits", RLIST), F(2, "requests", RLIST), F(3, "claims", resource_claims));
STRUCT(resize_policy, "ContainerResizePolicy", FR(1, "resourceName", S), FR(2, "restartPolicy", S));
LIST(resize_policies, NULL, resize_policy);
STRUCT(volume_mount, "VolumeMount", FR(1, "name", S), F(2, "readOnly", B), FK(7, "recursiveReadOnly", S), FR(3, "mountPath", S),
    F(4, "subPath", S), FK(5, "mountPropagation", S), F(6, "subPathExpr", S));
LIST(volume_mounts, NULL, volume_mount);
STRUCT(volume_device, "VolumeDevice", FR(1, "name", S), FR(2, "devicePath", S));
LIST(volume_devices, NULL, volume_device);
STRUCT(exec_action, "ExecAction", F(1, "command", SLIST));
STRUCT(http_header, "HTTPHeader", FR(1, "name", S), FR(2, "value", S));
LIST(http_headers, NULL, http_header);
STRUCT(http_get_action, "HTTPGetAction", F(1, "path", S), FR(2, "port", kite_schema_int_or_string), F(3, "host", S),
    F(4, "scheme", S), F(5, "httpHeaders", http_headers));
STRUCT(tcp_socket_action, "TCPSocketAction", FR(1, "port", kite_schema_int_or_string), F(2, "host", S));
STRUCT(grpc_action, "GRPCAction", FR(1, "port", I32), FK(2, "service", S));
STRUCT(sleep_action, "SleepAction", FR(1, "seconds", I64));
STRUCT(probe_handler, "ProbeHandler", F(1, "exec", exec_action), F(2, "httpGet", http_get_action),
    F(3, "tcpSocket", tcp_socket_action), F(4, "grpc", grpc_action));
STRUCT_PARTIAL(probe, "Probe", FI(1, "handler", probe_handler), F(2, "initialDelaySeconds", I32), F(3, "timeoutSeconds", I32),
    F(4, "periodSeconds", I32), F(5, "successThreshold", I32), F(6, "failureThreshold", I32),
    FK(7, "terminationGracePeriodSeconds", I64));
STRUCT(lifecycle_handler, "LifecycleHandler", F(1, "exec", exec_action), F(2, "httpGet", http_get_action),
    F(3, "tcpSocket", tcp_socket_action), F(4, "sleep", sleep_action));
STRUCT(lifecycle, "Lifecycle", F(1, "postStart", lifecycle_handler), F(2, "preStop", lifecycle_handler));
/* the security contexts, transcribed whole: kubectl writes pod templates as protobuf (`kubectl
 * create job --from=cronjob/x`), and a RAW field cannot be read from protobuf */
STRUCT(se_linux_options, "SELinuxOptions", F(1, "user", S), F(2, "role", S), F(3, "type", S), F(4, "level", S));
STRUCT(windows_options, "WindowsSecurityContextOptions", FK(1, "gmsaCredentialSpecName", S),
    FK(2, "gmsaCredentialSpec", S), FK(3, "runAsUserName", S), FK(4, "hostProcess", B));
STRUCT(seccomp_profile, "SeccompProfile", FR(1, "type", S), FK(2, "localhostProfile", S));
STRUCT(app_armor_profile, "AppArmorProfile", FR(1, "type", S), FK(2, "localhostProfile", S));
STRUCT(capabilities, "Capabilities", F(1, "add", SLIST), F(2, "drop", SLIST));
STRUCT(container_security_context, "SecurityContext", F(1, "capabilities", capabilities), FK(2, "privileged", B),
    F(3, "seLinuxOptions", se_linux_options), F(10, "windowsOptions", windows_options), FK(4, "runAsUser", I64),
    FK(8, "runAsGroup", I64), FK(5, "runAsNonRoot", B), FK(6, "readOnlyRootFilesystem", B),
    FK(7, "allowPrivilegeEscalation", B), FK(9, "procMount", S), F(11, "seccompProfile", seccomp_profile),
    F(12, "appArmorProfile", app_armor_profile));
LIST(int64s, NULL, I64);
STRUCT(sysctl, "Sysctl", FR(1, "name", S), FR(2, "value", S));
LIST(sysctls, NULL, sysctl);
STRUCT(pod_security_context, "PodSecurityContext", F(1, "seLinuxOptions", se_linux_options),
    F(8, "windowsOptions", windows_options), FK(2, "runAsUser", I64), FK(6, "runAsGroup", I64), FK(3, "runAsNonRoot", B),
    F(4, "supplementalGroups", int64s), FK(12, "supplementalGroupsPolicy", S), FK(5, "fsGroup", I64),
    F(7, "sysctls", sysctls), FK(9, "fsGroupChangePolicy", S), F(10, "seccompProfile", seccomp_profile),
    F(11, "appArmorProfile", app_armor_profile), FK(13, "seLinuxChangePolicy", S));
STRUCT(container, "Container", FR(1, "name", S), F(2, "image", S), F(3, "command", SLIST), F(4, "args", SLIST),
    F(5, "workingDir", S), F(6, "ports", container_ports), F(19, "envFrom", env_from_sources), F(7, "env", env_vars),
    F(8, "resources", resources), F(23, "resizePolicy", resize_policies), FK(24, "restartPolicy", S),
    F(9, "volumeMounts", volume_mounts), F(21, "volumeDevices", volume_devices), F(10, "livenessProbe", probe),
    F(11, "readinessProbe", probe), F(22, "startupProbe", probe), F(12, "lifecycle", lifecycle),
    F(13, "terminationMessagePath", S), F(20, "terminationMessagePolicy", S), F(14, "imagePullPolicy", S),
    F(15, "securityContext", container_security_context), F(16, "stdin", B), F(17, "stdinOnce", B), F(18, "tty", B));
LIST(containers, NULL, container);
/* EphemeralContainerCommon has Container's fields and numbers; inline in JSON */
STRUCT_PARTIAL(ephemeral_container, "EphemeralContainer", FI(1, "ephemeralContainerCommon", container),
    F(2, "targetContainerName", S));
LIST(ephemeral_containers, NULL, ephemeral_container);
/* the volume sources, the in-tree ones of old included */
STRUCT(host_path_source, "HostPathVolumeSource", FR(1, "path", S), FK(2, "type", S));
STRUCT(empty_dir_source, "EmptyDirVolumeSource", F(1, "medium", S), FK(2, "sizeLimit", Q));
STRUCT(gce_pd_source, "GCEPersistentDiskVolumeSource", FR(1, "pdName", S), F(2, "fsType", S), F(3, "partition", I32),
    F(4, "readOnly", B));
STRUCT(aws_ebs_source, "AWSElasticBlockStoreVolumeSource", FR(1, "volumeID", S), F(2, "fsType", S), F(3, "partition", I32),
    F(4, "readOnly", B));
STRUCT(git_repo_source, "GitRepoVolumeSource", FR(1, "repository", S), F(2, "revision", S), F(3, "directory", S));
STRUCT(key_to_path, "KeyToPath", FR(1, "key", S), FR(2, "path", S), FK(3, "mode", I32));
LIST(keys_to_paths, NULL, key_to_path);
STRUCT(secret_source, "SecretVolumeSource", F(1, "secretName", S), F(2, "items", keys_to_paths), FK(3, "defaultMode", I32),
    FK(4, "optional", B));
STRUCT(nfs_source, "NFSVolumeSource", FR(1, "server", S), FR(2, "path", S), F(3, "readOnly", B));
STRUCT(iscsi_source, "ISCSIVolumeSource", FR(1, "targetPortal", S), FR(2, "iqn", S), FR(3, "lun", I32),
    F(4, "iscsiInterface", S), F(5, "fsType", S), F(6, "readOnly", B), F(7, "portals", SLIST), F(8, "chapAuthDiscovery", B),
    F(11, "chapAuthSession", B), F(10, "secretRef", local_ref), FK(12, "initiatorName", S));
STRUCT(glusterfs_source, "GlusterfsVolumeSource", FR(1, "endpoints", S), FR(2, "path", S), F(3, "readOnly", B));
STRUCT(pvc_source, "PersistentVolumeClaimVolumeSource", FR(1, "claimName", S), F(2, "readOnly", B));
STRUCT(rbd_source, "RBDVolumeSource", FR(1, "monitors", SLIST), FR(2, "image", S), F(3, "fsType", S), F(4, "pool", S),
    F(5, "user", S), F(6, "keyring", S), F(7, "secretRef", local_ref), F(8, "readOnly", B));
STRUCT(flex_source, "FlexVolumeSource", FR(1, "driver", S), F(2, "fsType", S), F(3, "secretRef", local_ref),
    F(4, "readOnly", B), F(5, "options", SMAP));
STRUCT(cinder_source, "CinderVolumeSource", FR(1, "volumeID", S), F(2, "fsType", S), F(3, "readOnly", B),
    F(4, "secretRef", local_ref));
STRUCT(cephfs_source, "CephFSVolumeSource", FR(1, "monitors", SLIST), F(2, "path", S), F(3, "user", S), F(4, "secretFile", S),
    F(5, "secretRef", local_ref), F(6, "readOnly", B));
STRUCT(flocker_source, "FlockerVolumeSource", F(1, "datasetName", S), F(2, "datasetUUID", S));
STRUCT(downward_file, "DownwardAPIVolumeFile", FR(1, "path", S), F(2, "fieldRef", object_field_selector),
    F(3, "resourceFieldRef", resource_field_selector), FK(4, "mode", I32));
LIST(downward_files, NULL, downward_file);
STRUCT(downward_source, "DownwardAPIVolumeSource", F(1, "items", downward_files), FK(2, "defaultMode", I32));
STRUCT(fc_source, "FCVolumeSource", F(1, "targetWWNs", SLIST), FK(2, "lun", I32), F(3, "fsType", S), F(4, "readOnly", B),
    F(5, "wwids", SLIST));
STRUCT(azure_file_source, "AzureFileVolumeSource", FR(1, "secretName", S), FR(2, "shareName", S), F(3, "readOnly", B));
STRUCT_PARTIAL(configmap_source, "ConfigMapVolumeSource", FI(1, "localObjectReference", local_ref),
    F(2, "items", keys_to_paths), FK(3, "defaultMode", I32), FK(4, "optional", B));
STRUCT(vsphere_source, "VsphereVirtualDiskVolumeSource", FR(1, "volumePath", S), F(2, "fsType", S),
    F(3, "storagePolicyName", S), F(4, "storagePolicyID", S));
STRUCT(quobyte_source, "QuobyteVolumeSource", FR(1, "registry", S), FR(2, "volume", S), F(3, "readOnly", B), F(4, "user", S),
    F(5, "group", S), F(6, "tenant", S));
STRUCT(azure_disk_source, "AzureDiskVolumeSource", FR(1, "diskName", S), FR(2, "diskURI", S), FK(3, "cachingMode", S),
    FK(4, "fsType", S), FK(5, "readOnly", B), FK(6, "kind", S));
STRUCT(photon_source, "PhotonPersistentDiskVolumeSource", FR(1, "pdID", S), F(2, "fsType", S));
STRUCT_PARTIAL(secret_projection, "SecretProjection", FI(1, "localObjectReference", local_ref), F(2, "items", keys_to_paths),
    FK(4, "optional", B));
STRUCT(downward_projection, "DownwardAPIProjection", F(1, "items", downward_files));
STRUCT_PARTIAL(configmap_projection, "ConfigMapProjection", FI(1, "localObjectReference", local_ref),
    F(2, "items", keys_to_paths), FK(4, "optional", B));
STRUCT(sa_token_projection, "ServiceAccountTokenProjection", F(1, "audience", S), FK(2, "expirationSeconds", I64),
    FR(3, "path", S));
STRUCT(trust_bundle_projection, "ClusterTrustBundleProjection", FK(1, "name", S), FK(2, "signerName", S),
    F(3, "labelSelector", label_selector), FK(5, "optional", B), FR(4, "path", S));
STRUCT(volume_projection, "VolumeProjection", F(1, "secret", secret_projection), F(2, "downwardAPI", downward_projection),
    F(3, "configMap", configmap_projection), F(4, "serviceAccountToken", sa_token_projection),
    F(5, "clusterTrustBundle", trust_bundle_projection));
LIST(volume_projections, NULL, volume_projection);
STRUCT(projected_source, "ProjectedVolumeSource", F(1, "sources", volume_projections), FK(2, "defaultMode", I32));
STRUCT(portworx_source, "PortworxVolumeSource", FR(1, "volumeID", S), F(2, "fsType", S), F(3, "readOnly", B));
STRUCT(scaleio_source, "ScaleIOVolumeSource", FR(1, "gateway", S), FR(2, "system", S), FR(3, "secretRef", local_ref),
    F(4, "sslEnabled", B), F(5, "protectionDomain", S), F(6, "storagePool", S), F(7, "storageMode", S),
    F(8, "volumeName", S), F(9, "fsType", S), F(10, "readOnly", B));
STRUCT(storageos_source, "StorageOSVolumeSource", F(1, "volumeName", S), F(2, "volumeNamespace", S), F(3, "fsType", S),
    F(4, "readOnly", B), F(5, "secretRef", local_ref));
STRUCT(csi_source, "CSIVolumeSource", FR(1, "driver", S), FK(2, "readOnly", B), FK(3, "fsType", S),
    F(4, "volumeAttributes", SMAP), F(5, "nodePublishSecretRef", local_ref));
STRUCT(volume_resources, "VolumeResourceRequirements", F(1, "limits", RLIST), F(2, "requests", RLIST));
STRUCT(typed_local_ref, "TypedLocalObjectReference", FK(1, "apiGroup", S), FR(2, "kind", S), FR(3, "name", S));
STRUCT(typed_ref, "TypedObjectReference", FK(1, "apiGroup", S), FR(2, "kind", S), FR(3, "name", S), FK(4, "namespace", S));
STRUCT(pvc_spec, "PersistentVolumeClaimSpec", F(1, "accessModes", SLIST), F(4, "selector", label_selector),
    F(2, "resources", volume_resources), F(3, "volumeName", S), FK(5, "storageClassName", S), FK(6, "volumeMode", S),
    F(7, "dataSource", typed_local_ref), F(8, "dataSourceRef", typed_ref), FK(9, "volumeAttributesClassName", S));
STRUCT(pvc_template, "PersistentVolumeClaimTemplate", F(1, "metadata", kite_schema_object_meta), FR(2, "spec", pvc_spec));
STRUCT(ephemeral_source, "EphemeralVolumeSource", F(1, "volumeClaimTemplate", pvc_template));
STRUCT(image_source, "ImageVolumeSource", F(1, "reference", S), F(2, "pullPolicy", S));
STRUCT(volume_source, "VolumeSource", F(1, "hostPath", host_path_source), F(2, "emptyDir", empty_dir_source),
    F(3, "gcePersistentDisk", gce_pd_source), F(4, "awsElasticBlockStore", aws_ebs_source), F(5, "gitRepo", git_repo_source),
    F(6, "secret", secret_source), F(7, "nfs", nfs_source), F(8, "iscsi", iscsi_source), F(9, "glusterfs", glusterfs_source),
    F(10, "persistentVolumeClaim", pvc_source), F(11, "rbd", rbd_source), F(12, "flexVolume", flex_source),
    F(13, "cinder", cinder_source), F(14, "cephfs", cephfs_source), F(15, "flocker", flocker_source),
    F(16, "downwardAPI", downward_source), F(17, "fc", fc_source), F(18, "azureFile", azure_file_source),
    F(19, "configMap", configmap_source), F(20, "vsphereVolume", vsphere_source), F(21, "quobyte", quobyte_source),
    F(22, "azureDisk", azure_disk_source), F(23, "photonPersistentDisk", photon_source), F(26, "projected", projected_source),
    F(24, "portworxVolume", portworx_source), F(25, "scaleIO", scaleio_source), F(27, "storageos", storageos_source),
    F(28, "csi", csi_source), F(29, "ephemeral", ephemeral_source), F(30, "image", image_source));
STRUCT_PARTIAL(volume, "Volume", FR(1, "name", S), FI(2, "volumeSource", volume_source));
LIST(volumes, NULL, volume);
STRUCT(toleration, "Toleration", F(1, "key", S), F(2, "operator", S), F(3, "value", S), F(4, "effect", S),
    FK(5, "tolerationSeconds", I64));
LIST(tolerations, NULL, toleration);
STRUCT(host_alias, "HostAlias", FR(1, "ip", S), F(2, "hostnames", SLIST));
LIST(host_aliases, NULL, host_alias);
STRUCT(node_selector_requirement, "NodeSelectorRequirement", FR(1, "key", S), FR(2, "operator", S), F(3, "values", SLIST));
LIST(node_selector_requirements, NULL, node_selector_requirement);
STRUCT(node_selector_term, "NodeSelectorTerm", F(1, "matchExpressions", node_selector_requirements),
    F(2, "matchFields", node_selector_requirements));
LIST(node_selector_terms, NULL, node_selector_term);
STRUCT(node_selector, "NodeSelector", FR(1, "nodeSelectorTerms", node_selector_terms));
STRUCT(preferred_term, "PreferredSchedulingTerm", FR(1, "weight", I32), FR(2, "preference", node_selector_term));
LIST(preferred_terms, NULL, preferred_term);
STRUCT(node_affinity, "NodeAffinity", F(1, "requiredDuringSchedulingIgnoredDuringExecution", node_selector),
    F(2, "preferredDuringSchedulingIgnoredDuringExecution", preferred_terms));
STRUCT(pod_affinity_term, "PodAffinityTerm", F(1, "labelSelector", label_selector), F(2, "namespaces", SLIST),
    FR(3, "topologyKey", S), F(4, "namespaceSelector", label_selector), F(5, "matchLabelKeys", SLIST),
    F(6, "mismatchLabelKeys", SLIST));
LIST(pod_affinity_terms, NULL, pod_affinity_term);
STRUCT(weighted_term, "WeightedPodAffinityTerm", FR(1, "weight", I32), FR(2, "podAffinityTerm", pod_affinity_term));
LIST(weighted_terms, NULL, weighted_term);
STRUCT(pod_affinity, "PodAffinity", F(1, "requiredDuringSchedulingIgnoredDuringExecution", pod_affinity_terms),
    F(2, "preferredDuringSchedulingIgnoredDuringExecution", weighted_terms));
STRUCT(pod_anti_affinity, "PodAntiAffinity", F(1, "requiredDuringSchedulingIgnoredDuringExecution", pod_affinity_terms),
    F(2, "preferredDuringSchedulingIgnoredDuringExecution", weighted_terms));
STRUCT(affinity, "Affinity", F(1, "nodeAffinity", node_affinity), F(2, "podAffinity", pod_affinity),
    F(3, "podAntiAffinity", pod_anti_affinity));
STRUCT(dns_option, "PodDNSConfigOption", F(1, "name", S), FK(2, "value", S));
LIST(dns_options, NULL, dns_option);
STRUCT(dns_config, "PodDNSConfig", F(1, "nameservers", SLIST), F(2, "searches", SLIST), F(3, "options", dns_options));
STRUCT(readiness_gate, "PodReadinessGate", FR(1, "conditionType", S));
LIST(readiness_gates, NULL, readiness_gate);
STRUCT(spread_constraint, "TopologySpreadConstraint", FR(1, "maxSkew", I32), FR(2, "topologyKey", S),
    FR(3, "whenUnsatisfiable", S), F(4, "labelSelector", label_selector), FK(5, "minDomains", I32),
    FK(6, "nodeAffinityPolicy", S), FK(7, "nodeTaintsPolicy", S), F(8, "matchLabelKeys", SLIST));
LIST(spread_constraints, NULL, spread_constraint);
STRUCT(pod_os, "PodOS", FR(1, "name", S));
STRUCT(scheduling_gate, "PodSchedulingGate", FR(1, "name", S));
LIST(scheduling_gates, NULL, scheduling_gate);
STRUCT(pod_resource_claim, "PodResourceClaim", FR(1, "name", S), FK(3, "resourceClaimName", S),
    FK(4, "resourceClaimTemplateName", S));
LIST(pod_resource_claims, NULL, pod_resource_claim);
STRUCT(pod_spec, "PodSpec", F(1, "volumes", volumes), F(20, "initContainers", containers), FR(2, "containers", containers),
    F(34, "ephemeralContainers", ephemeral_containers), F(3, "restartPolicy", S), FK(4, "terminationGracePeriodSeconds", I64),
    FK(5, "activeDeadlineSeconds", I64), F(6, "dnsPolicy", S), F(7, "nodeSelector", SMAP), F(8, "serviceAccountName", S),
    F(9, "serviceAccount", S), FK(21, "automountServiceAccountToken", B), F(10, "nodeName", S), F(11, "hostNetwork", B),
    F(12, "hostPID", B), F(13, "hostIPC", B), FK(27, "shareProcessNamespace", B), F(14, "securityContext", pod_security_context),
    F(15, "imagePullSecrets", local_refs), F(16, "hostname", S), F(17, "subdomain", S), F(18, "affinity", affinity),
    F(19, "schedulerName", S), F(22, "tolerations", tolerations), F(23, "hostAliases", host_aliases),
    F(24, "priorityClassName", S), FK(25, "priority", I32), F(26, "dnsConfig", dns_config), F(28, "readinessGates", readiness_gates),
    FK(29, "runtimeClassName", S), FK(30, "enableServiceLinks", B), FK(31, "preemptionPolicy", S), F(32, "overhead", RLIST),
    F(33, "topologySpreadConstraints", spread_constraints), FK(35, "setHostnameAsFQDN", B), F(36, "os", pod_os),
    FK(37, "hostUsers", B), F(38, "schedulingGates", scheduling_gates), F(39, "resourceClaims", pod_resource_claims),
    F(40, "resources", resources));
STRUCT(pod_condition, "PodCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastProbeTime", T),
    F(4, "lastTransitionTime", T), F(5, "reason", S), F(6, "message", S));
LIST(pod_conditions, NULL, pod_condition);
STRUCT(pod_ip_schema, "PodIP", FR(1, "ip", S));
LIST(pod_ips, NULL, pod_ip_schema);
STRUCT(host_ip, "HostIP", FR(1, "ip", S));
LIST(host_ips, NULL, host_ip);
STRUCT(state_waiting, "ContainerStateWaiting", F(1, "reason", S), F(2, "message", S));
STRUCT(state_running, "ContainerStateRunning", F(1, "startedAt", T));
STRUCT(state_terminated, "ContainerStateTerminated", FR(1, "exitCode", I32), F(2, "signal", I32), F(3, "reason", S),
    F(4, "message", S), F(5, "startedAt", T), F(6, "finishedAt", T), F(7, "containerID", S));
STRUCT(container_state, "ContainerState", F(1, "waiting", state_waiting), F(2, "running", state_running),
    F(3, "terminated", state_terminated));
STRUCT(volume_mount_status, "VolumeMountStatus", FR(1, "name", S), FR(2, "mountPath", S), F(3, "readOnly", B),
    FK(4, "recursiveReadOnly", S));
LIST(volume_mount_statuses, NULL, volume_mount_status);
STRUCT(linux_container_user, "LinuxContainerUser", FR(1, "uid", I64), FR(2, "gid", I64), F(3, "supplementalGroups", int64s));
STRUCT(container_user, "ContainerUser", F(1, "linux", linux_container_user));
STRUCT(resource_health, "ResourceHealth", FR(1, "resourceID", S), F(2, "health", S));
LIST(resource_healths, NULL, resource_health);
STRUCT(resource_status, "ResourceStatus", FR(1, "name", S), F(2, "resources", resource_healths));
LIST(resource_statuses, NULL, resource_status);
STRUCT(container_status, "ContainerStatus", FR(1, "name", S), F(2, "state", container_state),
    F(3, "lastState", container_state), FR(4, "ready", B), FR(5, "restartCount", I32), FR(6, "image", S), FR(7, "imageID", S),
    F(8, "containerID", S), FK(9, "started", B), F(10, "allocatedResources", RLIST), F(11, "resources", resources),
    F(12, "volumeMounts", volume_mount_statuses), F(13, "user", container_user),
    F(14, "allocatedResourcesStatus", resource_statuses));
LIST(container_statuses, NULL, container_status);
STRUCT(pod_claim_status, "PodResourceClaimStatus", FR(1, "name", S), FK(2, "resourceClaimName", S));
LIST(pod_claim_statuses, NULL, pod_claim_status);
STRUCT(pod_status_schema, "PodStatus", F(1, "phase", S), F(2, "conditions", pod_conditions), F(3, "message", S), F(4, "reason", S),
    F(11, "nominatedNodeName", S), F(5, "hostIP", S), F(16, "hostIPs", host_ips), F(6, "podIP", S), F(12, "podIPs", pod_ips),
    F(7, "startTime", T), F(10, "initContainerStatuses", container_statuses), F(8, "containerStatuses", container_statuses),
    F(9, "qosClass", S), F(13, "ephemeralContainerStatuses", container_statuses), F(14, "resize", S),
    F(15, "resourceClaimStatuses", pod_claim_statuses));
ROOT_DOC(kite_schema_pod, "Pod",
    "Pod is a collection of containers that can run on a host. This resource is created by clients and scheduled onto hosts.", TYPE_META, F(2, "spec", pod_spec), F(3, "status", pod_status_schema));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    {"spec.containers", "name", KITE_SMP_MERGE, NULL},
    {"spec.containers.ports", "containerPort", KITE_SMP_MERGE, "containerPort,protocol=TCP"},
    {"spec.containers.env", "name", KITE_SMP_MERGE, NULL},
    {"spec.containers.volumeMounts", "mountPath", KITE_SMP_MERGE, NULL},
    {"spec.containers.volumeDevices", "devicePath", KITE_SMP_MERGE, NULL},
    {"spec.initContainers", "name", KITE_SMP_MERGE, NULL},
    {"spec.initContainers.ports", "containerPort", KITE_SMP_MERGE, "containerPort,protocol=TCP"},
    {"spec.initContainers.env", "name", KITE_SMP_MERGE, NULL},
    {"spec.initContainers.volumeMounts", "mountPath", KITE_SMP_MERGE, NULL},
    {"spec.ephemeralContainers", "name", KITE_SMP_MERGE, NULL},
    {"spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS, NULL},
    {"spec.imagePullSecrets", "name", KITE_SMP_MERGE, NULL},
    {"spec.hostAliases", "ip", KITE_SMP_MERGE, NULL},
    {"spec.topologySpreadConstraints", "topologyKey", KITE_SMP_MERGE, NULL},
    {"spec.resourceClaims", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS, NULL},
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
    {"status.podIPs", "ip", KITE_SMP_MERGE, NULL},
    {"status.hostIPs", "ip", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static const char *const fields[] = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                         "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                                         "status.podIP", "status.nominatedNodeName", NULL};


/* ---- strategy: defaults (k8s.io/kubernetes pkg/apis/core/v1/defaults.go), QoS class, validation
 * (pkg/apis/core/validation), graceful deletion and binding (pkg/registry/core/pod) ---------------- */

#define DEFAULT(o, k, v)                                   \
    do {                                                   \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v);    \
    } while (0)

static bool is_obj(json_object *o) { return o && json_object_is_type(o, json_type_object); }

/* SetDefaults_Container: a ":latest" or missing tag is pulled every time; a pinned tag or a
 * digest only when missing. The tag is after the last ':' of the last path component (a
 * registry's ":port" is before a '/'). */
static const char *pull_policy(const char *image) {
    if (strchr(image, '@')) return "IfNotPresent";
    const char *slash = strrchr(image, '/');
    const char *colon = strrchr(slash ? slash : image, ':');
    return !colon || strcmp(colon + 1, "latest") == 0 ? "Always" : "IfNotPresent";
}

static void container_defaults(json_object *c, bool host_network) {
    if (!is_obj(c)) return;
    DEFAULT(c, "imagePullPolicy", json_object_new_string(pull_policy(STR(c, "image"))));
    DEFAULT(c, "terminationMessagePath", json_object_new_string("/dev/termination-log"));
    DEFAULT(c, "terminationMessagePolicy", json_object_new_string("File"));
    json_object *ports = OBJ(c, "ports");
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (!is_obj(p)) continue;
        DEFAULT(p, "protocol", json_object_new_string("TCP"));
        /* a host-network pod's ports are host ports (SetDefaults_PodSpec) */
        if (host_network && !kite_obj_get(p, "hostPort") && kite_obj_get(p, "containerPort"))
            kite_obj_set(p, "hostPort", json_object_get(kite_obj_get(p, "containerPort")));
    }
    /* SetDefaults_Pod: a resource with a limit and no request is requested at its limit */
    json_object *res = kite_obj_ensure(c, "resources"), *limits = OBJ(res, "limits");
    if (is_obj(limits) && json_object_object_length(limits) > 0) {
        json_object *req = kite_obj_ensure(res, "requests");
        json_object_object_foreach(limits, k, v) DEFAULT(req, k, json_object_get(v));
    }
}

/* A compute resource's quantity in a ResourceList, in milli-units; false when absent. */
static bool quantity(json_object *list, const char *name, int64_t *milli) {
    const char *s = STR(list, name);
    return *s && kite_quantity_parse_milli(s, milli) == 0;
}

static const char *qos_class(json_object *pod) {
    static const char *const compute[] = {"cpu", "memory"}; /* the resources QoS is about */
    int64_t req[2] = {0}, lim[2] = {0};
    bool has_req[2] = {false}, has_lim[2] = {false}, guaranteed = true;
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        json_object *cs = OBJ(pod, "spec", lists[l]);
        for (size_t i = 0; i < arr_len(cs); i++) {
            json_object *c = json_object_array_get_idx(cs, i);
            for (size_t r = 0; r < 2; r++) {
                int64_t q;
                if (quantity(OBJ(c, "resources", "requests"), compute[r], &q) && q > 0) {
                    req[r] += q;
                    has_req[r] = true;
                }
                if (quantity(OBJ(c, "resources", "limits"), compute[r], &q) && q > 0) {
                    lim[r] += q;
                    has_lim[r] = true;
                } else {
                    guaranteed = false; /* every container must limit both */
                }
            }
        }
    }
    if (!has_req[0] && !has_req[1] && !has_lim[0] && !has_lim[1]) return "BestEffort";
    for (size_t r = 0; r < 2; r++)
        if (has_req[r] && (!has_lim[r] || lim[r] != req[r])) guaranteed = false;
    if (guaranteed && has_req[0] + has_req[1] == has_lim[0] + has_lim[1]) return "Guaranteed";
    return "Burstable";
}

static void pod_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    DEFAULT(spec, "restartPolicy", json_object_new_string("Always"));
    DEFAULT(spec, "terminationGracePeriodSeconds", json_object_new_int64(30));
    DEFAULT(spec, "dnsPolicy", json_object_new_string("ClusterFirst"));
    DEFAULT(spec, "securityContext", json_object_new_object());
    DEFAULT(spec, "schedulerName", json_object_new_string("default-scheduler"));
    DEFAULT(spec, "enableServiceLinks", json_object_new_boolean(true));
    /* the Priority admission plugin's, for a pod without a priority class */
    DEFAULT(spec, "priority", json_object_new_int(0));
    DEFAULT(spec, "preemptionPolicy", json_object_new_string("PreemptLowerPriority"));
    bool host_network = json_object_get_boolean(OBJ(spec, "hostNetwork"));
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        json_object *cs = OBJ(spec, lists[l]);
        for (size_t i = 0; i < arr_len(cs); i++) container_defaults(json_object_array_get_idx(cs, i), host_network);
    }
    json_object *ecs = OBJ(spec, "ephemeralContainers");
    for (size_t i = 0; i < arr_len(ecs); i++) container_defaults(json_object_array_get_idx(ecs, i), false);
    json_object *status = kite_obj_ensure(obj, "status");
    DEFAULT(status, "phase", json_object_new_string("Pending"));
    DEFAULT(status, "qosClass", json_object_new_string(qos_class(obj)));
}

/* DefaultTolerationSeconds: a pod that tolerates neither taint (no toleration of the key, or
 * of every key, with NoExecute or every effect: kite_tolerations_cover) is evicted that long
 * after its node becomes not ready or unreachable. */
static void pod_default_tolerations(json_object *obj, int64_t not_ready_s, int64_t unreachable_s) {
    static const char *const keys[] = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"};
    int64_t secs[] = {not_ready_s, unreachable_s};
    json_object *spec = kite_obj_ensure(obj, "spec");
    for (size_t i = 0; i < 2; i++) {
        json_object *tols = OBJ(spec, "tolerations");
        if (kite_tolerations_cover(tols, keys[i], "NoExecute")) continue;
        if (!tols || !json_object_is_type(tols, json_type_array)) {
            tols = json_object_new_array();
            kite_obj_set(spec, "tolerations", tols);
        }
        json_object *t = json_object_new_object();
        kite_obj_set(t, "key", json_object_new_string(keys[i]));
        kite_obj_set(t, "operator", json_object_new_string("Exists"));
        kite_obj_set(t, "effect", json_object_new_string("NoExecute"));
        kite_obj_set(t, "tolerationSeconds", json_object_new_int64(secs[i]));
        json_object_array_add(tols, t);
    }
}

/* ---- validation ---- */

static void unsupported(struct kite_causes *c, const char *field, const char *value, const char *supported) {
    if (!*value) kite_causes_add(c, "FieldValueRequired", field, "Required value");
    else kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: \"%s\": supported values: %s", value, supported);
}

static bool one_of(const char *v, const char *const *set) {
    for (; *set; set++)
        if (strcmp(v, *set) == 0) return true;
    return false;
}

static void validate_resources(json_object *res, const char *path, struct kite_causes *c) {
    json_object *req = OBJ(res, "requests"), *lim = OBJ(res, "limits");
    static const char *const lists[] = {"limits", "requests"};
    for (size_t l = 0; l < 2; l++) {
        json_object *list = OBJ(res, lists[l]);
        if (!is_obj(list)) continue;
        json_object_object_foreach(list, k, v) {
            int64_t q;
            if (kite_quantity_parse_milli(str_of(v), &q) < 0 || q >= 0) continue;
            _cleanup_free_ char *field = kite_asprintf("%s.%s[%s]", path, lists[l], k);
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": must be greater than or equal to 0", str_of(v));
        }
    }
    if (!is_obj(req)) return;
    json_object_object_foreach(req, k, v) {
        int64_t rq, lq;
        if (kite_quantity_parse_milli(str_of(v), &rq) < 0 || !quantity(lim, k, &lq) || rq <= lq) continue;
        _cleanup_free_ char *field = kite_asprintf("%s.requests[%s]", path, k);
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": must be less than or equal to %s limit of %s",
                        str_of(v), k, STR(lim, k));
    }
}

static void validate_containers(json_object *cs, const char *list, json_object *seen, struct kite_causes *c) {
    static const char *const pull[] = {"Always", "IfNotPresent", "Never", NULL};
    static const char *const protocols[] = {"SCTP", "TCP", "UDP", NULL};
    char path[96], field[160];
    for (size_t i = 0; i < arr_len(cs); i++) {
        json_object *ctr = json_object_array_get_idx(cs, i);
        snprintf(path, sizeof path, "spec.%s[%zu]", list, i);
        const char *name = STR(ctr, "name");
        snprintf(field, sizeof field, "%s.name", path);
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n;
        if (!*name) {
            kite_causes_add(c, "FieldValueRequired", field, "Required value");
        } else if ((n = kite_dns1123_label_errs(name, msgs)) > 0) {
            kite_causes_add_invalid(c, field, name, msgs, n);
        } else if (json_object_object_get_ex(seen, name, NULL)) {
            kite_causes_add(c, "FieldValueDuplicate", field, "Duplicate value: \"%s\"", name);
        } else {
            json_object_object_add(seen, name, NULL);
        }
        snprintf(field, sizeof field, "%s.image", path);
        if (!*STR(ctr, "image")) kite_causes_add(c, "FieldValueRequired", field, "Required value");
        snprintf(field, sizeof field, "%s.imagePullPolicy", path);
        if (!one_of(STR(ctr, "imagePullPolicy"), pull))
            unsupported(c, field, STR(ctr, "imagePullPolicy"), "\"Always\", \"IfNotPresent\", \"Never\"");
        json_object *ports = OBJ(ctr, "ports");
        for (size_t p = 0; p < arr_len(ports); p++) {
            json_object *port = json_object_array_get_idx(ports, p);
            int64_t cp = int_of(OBJ(port, "containerPort"));
            snprintf(field, sizeof field, "%s.ports[%zu].containerPort", path, p);
            if (!OBJ(port, "containerPort")) kite_causes_add(c, "FieldValueRequired", field, "Required value");
            else if (cp < 1 || cp > 65535)
                kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be between 1 and 65535, inclusive", (long long)cp);
            snprintf(field, sizeof field, "%s.ports[%zu].protocol", path, p);
            if (!one_of(STR(port, "protocol"), protocols)) unsupported(c, field, STR(port, "protocol"), "\"SCTP\", \"TCP\", \"UDP\"");
        }
        snprintf(field, sizeof field, "%s.resources", path);
        validate_resources(OBJ(ctr, "resources"), field, c);
    }
}

static bool subset(json_object *a, json_object *b) { /* every element of array a is in array b */
    for (size_t i = 0; i < arr_len(a); i++) {
        bool found = false;
        for (size_t j = 0; j < arr_len(b) && !found; j++)
            found = kite_json_equal(json_object_array_get_idx(a, i), json_object_array_get_idx(b, j));
        if (!found) return false;
    }
    return true;
}

#define POD_UPDATABLE                                                                                                  \
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "    \
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it " \
    "was previously negative)"

/* ValidatePodUpdate: a pod's spec is fixed once created but for the fields in POD_UPDATABLE
 * (and removing scheduling gates). What changed is listed after the message as Go's cmp.Diff
 * would list it (top-level fields, with JSON values). */
static void pod_defaults(json_object *obj);

static void validate_update(json_object *obj, json_object *old_stored, struct kite_causes *c) {
    /* the stored pod as defaulted now (obj is): one stored before a default was added differs
     * from obj by that default alone, which is no change of the user's */
    json_object *old = NULL;
    json_object_deep_copy(old_stored, &old, NULL);
    if (!old) return;
    pod_defaults(old);
    json_object *spec = OBJ(obj, "spec"), *ospec = OBJ(old, "spec");
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++)
        if (arr_len(OBJ(spec, lists[l])) != arr_len(OBJ(ospec, lists[l]))) {
            char field[32];
            snprintf(field, sizeof field, "spec.%s", lists[l]);
            kite_causes_add(c, "FieldValueForbidden", field, "Forbidden: pod updates may not add or remove containers");
            json_object_put(old);
            return;
        }
    json_object *munged = NULL;
    json_object_deep_copy(spec, &munged, NULL);
    if (!munged) munged = json_object_new_object();
    for (size_t l = 0; l < 2; l++) {
        json_object *cs = OBJ(munged, lists[l]), *ocs = OBJ(ospec, lists[l]);
        for (size_t i = 0; i < arr_len(cs); i++) {
            json_object *ctr = json_object_array_get_idx(cs, i), *octr = json_object_array_get_idx(ocs, i);
            if (!is_obj(ctr)) continue;
            json_object *img = OBJ(octr, "image");
            if (img) kite_obj_set(ctr, "image", json_object_get(img));
            else json_object_object_del(ctr, "image");
        }
    }
    /* ephemeral containers change through their subresource alone (validate_ephemeral) */
    if (OBJ(ospec, "ephemeralContainers")) kite_obj_set(munged, "ephemeralContainers", json_object_get(OBJ(ospec, "ephemeralContainers")));
    else json_object_object_del(munged, "ephemeralContainers");
    static const char *const copied[] = {"activeDeadlineSeconds", "tolerations", "schedulingGates", NULL};
    for (size_t i = 0; copied[i]; i++) {
        json_object *nv = OBJ(munged, copied[i]), *ov = OBJ(ospec, copied[i]);
        bool ok = i == 0 || (i == 1 ? subset(ov, nv) : subset(nv, ov)); /* tolerations added, gates removed */
        if (!ok) continue;
        if (ov) kite_obj_set(munged, copied[i], json_object_get(ov));
        else json_object_object_del(munged, copied[i]);
    }
    if (int_of(OBJ(ospec, "terminationGracePeriodSeconds")) < 0 && int_of(OBJ(munged, "terminationGracePeriodSeconds")) == 1)
        kite_obj_set(munged, "terminationGracePeriodSeconds", json_object_get(OBJ(ospec, "terminationGracePeriodSeconds")));
    if (!kite_json_equal(munged, ospec)) {
        struct kite_buf diff = {0};
        kite_buf_puts(&diff, "  core.PodSpec{\n");
        for (int pass = 0; pass < 2; pass++) {
            json_object *a = pass ? munged : ospec;
            if (!is_obj(a)) continue;
            json_object_object_foreach(a, k, v) {
                json_object *ov = OBJ(ospec, k), *nv = OBJ(munged, k);
                if (pass && ov) continue; /* listed in the first pass */
                if (kite_json_equal(ov, nv)) continue;
                (void)v;
                if (ov) kite_buf_printf(&diff, "- \t%c%s: %s,\n", toupper((unsigned char)k[0]), k + 1, json_object_to_json_string_ext(ov, JSON_C_TO_STRING_PLAIN));
                if (nv) kite_buf_printf(&diff, "+ \t%c%s: %s,\n", toupper((unsigned char)k[0]), k + 1, json_object_to_json_string_ext(nv, JSON_C_TO_STRING_PLAIN));
            }
        }
        kite_buf_puts(&diff, "  }\n");
        kite_causes_add(c, "FieldValueForbidden", "spec", "Forbidden: pod updates may not change fields other than " POD_UPDATABLE "\n%s", diff.p);
        kite_buf_release(&diff);
    }
    json_object_put(munged);
    json_object_put(old);
}

/* validateEphemeralContainers and ValidatePodEphemeralContainersUpdate: the containers of old
 * stay as they were, and each one added has a name no other container of the pod has, targets
 * (targetContainerName) one of the pod's init or regular containers, and sets none of the
 * fields an ephemeral container cannot have (ports, probes, lifecycle, resources...). seen:
 * the names of the init and regular containers. */
static void validate_ephemeral(json_object *spec, json_object *ospec, json_object *seen, struct kite_causes *c) {
    json_object *ecs = OBJ(spec, "ephemeralContainers"), *oecs = OBJ(ospec, "ephemeralContainers");
    for (size_t i = 0; i < arr_len(oecs); i++) {
        json_object *oe = json_object_array_get_idx(oecs, i), *ne = NULL;
        for (size_t j = 0; j < arr_len(ecs) && !ne; j++)
            if (kite_streq(STR(json_object_array_get_idx(ecs, j), "name"), STR(oe, "name"))) ne = json_object_array_get_idx(ecs, j);
        if (!ne)
            kite_causes_add(c, "FieldValueForbidden", "spec.ephemeralContainers",
                            "Forbidden: existing ephemeral containers \"%s\" may not be removed\n", STR(oe, "name"));
        else if (!kite_json_equal(ne, oe))
            kite_causes_add(c, "FieldValueForbidden", "spec.ephemeralContainers",
                            "Forbidden: existing ephemeral containers \"%s\" may not be changed\n", STR(oe, "name"));
    }
    json_object *regular = NULL; /* the names of the init and regular containers alone */
    json_object_deep_copy(seen, &regular, NULL);
    validate_containers(ecs, "ephemeralContainers", seen, c);
    static const char *const forbidden[] = {"ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
                                            "resizePolicy", "restartPolicy"};
    char field[128];
    for (size_t i = 0; i < arr_len(ecs); i++) {
        json_object *ec = json_object_array_get_idx(ecs, i);
        for (size_t k = 0; k < KITE_ARRAY_SIZE(forbidden); k++) {
            json_object *v = OBJ(ec, forbidden[k]);
            if (!v || (json_object_is_type(v, json_type_array) && !arr_len(v))) continue;
            snprintf(field, sizeof field, "spec.ephemeralContainers[%zu].%s", i, forbidden[k]);
            kite_causes_add(c, "FieldValueForbidden", field, "Forbidden: cannot be set for an Ephemeral Container");
        }
        json_object *res = OBJ(ec, "resources");
        json_object *lim = OBJ(res, "limits"), *req = OBJ(res, "requests");
        if ((is_obj(lim) && json_object_object_length(lim) > 0) || (is_obj(req) && json_object_object_length(req) > 0) ||
            arr_len(OBJ(res, "claims"))) {
            snprintf(field, sizeof field, "spec.ephemeralContainers[%zu].resources", i);
            kite_causes_add(c, "FieldValueForbidden", field, "Forbidden: cannot be set for an Ephemeral Container");
        }
        const char *target = STR(ec, "targetContainerName");
        if (*target && !json_object_object_get_ex(regular, target, NULL)) {
            snprintf(field, sizeof field, "spec.ephemeralContainers[%zu].targetContainerName", i);
            kite_causes_add(c, "FieldValueNotFound", field, "Not found: \"%s\"", target);
        }
    }
    json_object_put(regular);
}

static void pod_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    json_object *seen = json_object_new_object(); /* container names, init and regular: one namespace */
    validate_containers(OBJ(spec, "initContainers"), "initContainers", seen, c);
    if (!arr_len(OBJ(spec, "containers"))) kite_causes_add(c, "FieldValueRequired", "spec.containers", "Required value");
    validate_containers(OBJ(spec, "containers"), "containers", seen, c);
    if (!old && arr_len(OBJ(spec, "ephemeralContainers")))
        kite_causes_add(c, "FieldValueForbidden", "spec.ephemeralContainers", "Forbidden: cannot be set on create");
    else if (old && !kite_json_equal(OBJ(spec, "ephemeralContainers"), OBJ(old, "spec", "ephemeralContainers")))
        validate_ephemeral(spec, OBJ(old, "spec"), seen, c);
    json_object_put(seen);
    static const char *const restart[] = {"Always", "OnFailure", "Never", NULL};
    static const char *const dns[] = {"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None", NULL};
    if (!one_of(STR(spec, "restartPolicy"), restart))
        unsupported(c, "spec.restartPolicy", STR(spec, "restartPolicy"), "\"Always\", \"OnFailure\", \"Never\"");
    if (!one_of(STR(spec, "dnsPolicy"), dns))
        unsupported(c, "spec.dnsPolicy", STR(spec, "dnsPolicy"), "\"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"");
    json_object *ads = OBJ(spec, "activeDeadlineSeconds");
    if (ads && (int_of(ads) < 1 || int_of(ads) > INT32_MAX))
        kite_causes_add(c, "FieldValueInvalid", "spec.activeDeadlineSeconds",
                        "Invalid value: %lld: must be between 1 and 2147483647, inclusive", (long long)int_of(ads));
    if (old) validate_update(obj, old, c);
}

/* ---- deletion and binding ---- */

/* CheckGracefulDelete: the request's grace, else the spec's; a pod no node runs (never bound,
 * or finished) goes at once. */
static int64_t pod_delete_grace(json_object *obj, int64_t requested) {
    int64_t g = requested;
    if (g < 0) g = int_of(OBJ(obj, "spec", "terminationGracePeriodSeconds"));
    const char *phase = STR(obj, "status", "phase");
    if (!*STR(obj, "spec", "nodeName") || strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) g = 0;
    return g < 0 ? 1 : g;
}

/* pods/binding (BindingREST): assigns an unassigned pod to the target node, once. */
static int pod_bind(json_object *obj, json_object *binding, int64_t now_ns, char **ret_msg) {
    const char *node = STR(binding, "target", "name"), *kind = STR(binding, "target", "kind");
    const char *name = STR(obj, "metadata", "name");
    if (!*node) {
        *ret_msg = kite_asprintf("Binding \"%s\" is invalid: target.name: Required value", name);
        return 422;
    }
    if (*kind && strcmp(kind, "Node") != 0) {
        *ret_msg = kite_asprintf("Binding \"%s\" is invalid: target.kind: Invalid value: \"%s\": must be empty or 'Node'", name, kind);
        return 422;
    }
    if (*STR(obj, "metadata", "deletionTimestamp")) {
        *ret_msg = kite_asprintf("pod %s is being deleted, cannot be assigned to a host", name);
        return 409;
    }
    if (*STR(obj, "spec", "nodeName")) {
        *ret_msg = kite_asprintf("pod %s is already assigned to node \"%s\"", name, STR(obj, "spec", "nodeName"));
        return 409;
    }
    if (arr_len(OBJ(obj, "spec", "schedulingGates"))) {
        *ret_msg = kite_asprintf("pod %s has non-empty .spec.schedulingGates", name);
        return 409;
    }
    kite_obj_set(kite_obj_ensure(obj, "spec"), "nodeName", json_object_new_string(node));
    json_object *ann = OBJ(binding, "metadata", "annotations");
    if (is_obj(ann)) {
        json_object *pann = kite_obj_ensure(kite_obj_ensure(obj, "metadata"), "annotations");
        json_object_object_foreach(ann, k, v) kite_obj_set(pann, k, json_object_get(v));
    }
    /* PodScheduled becomes True (its transition time now) */
    json_object *status = kite_obj_ensure(obj, "status"), *conds = OBJ(status, "conditions"), *cond = NULL;
    if (!conds || !json_object_is_type(conds, json_type_array)) {
        conds = json_object_new_array();
        kite_obj_set(status, "conditions", conds);
    }
    for (size_t i = 0; i < arr_len(conds) && !cond; i++)
        if (strcmp(STR(json_object_array_get_idx(conds, i), "type"), "PodScheduled") == 0) cond = json_object_array_get_idx(conds, i);
    if (!cond) {
        cond = json_object_new_object();
        kite_obj_set(cond, "type", json_object_new_string("PodScheduled"));
        json_object_array_add(conds, cond);
    }
    if (strcmp(STR(cond, "status"), "True") != 0) {
        char ts[21];
        kite_time_format(now_ns, ts);
        kite_obj_set(cond, "status", json_object_new_string("True"));
        kite_obj_set(cond, "lastProbeTime", NULL);
        kite_obj_set(cond, "lastTransitionTime", json_object_new_string(ts));
        json_object_object_del(cond, "reason");
        json_object_object_del(cond, "message");
    }
    return 0;
}


/* pods/log (LogREST, LogLocation in pkg/registry/core/pod/strategy.go and the kubelet's
 * validateContainerLogStatus): the container (the only one when none is named), the pod's
 * node, and the agent's /containerLogs path with the log options. */
static bool has_container(json_object *list, const char *name) {
    for (size_t i = 0; list && json_object_is_type(list, json_type_array) && i < json_object_array_length(list); i++)
        if (kite_streq(STR(json_object_array_get_idx(list, i), "name"), name)) return true;
    return false;
}

static json_object *log_container_status(json_object *pod, const char *name) {
    static const char *const lists[] = {"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"};
    for (size_t k = 0; k < KITE_ARRAY_SIZE(lists); k++) {
        json_object *l = OBJ(pod, "status", lists[k]);
        for (size_t i = 0; l && json_object_is_type(l, json_type_array) && i < json_object_array_length(l); i++)
            if (kite_streq(STR(json_object_array_get_idx(l, i), "name"), name)) return json_object_array_get_idx(l, i);
    }
    return NULL;
}

/* An integer query parameter at least min; false with *ret_msg when it is not one. */
static bool log_int(const char *(*query)(void *, const char *), void *qud, const char *name, int64_t min,
                    const char *must, char **ret_msg) {
    const char *v = query(qud, name);
    if (!v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno) {
        *ret_msg = kite_asprintf("strconv.ParseInt: parsing \"%s\": invalid syntax", v);
        return false;
    }
    if (x < min) {
        *ret_msg = kite_asprintf("PodLogOptions \"\" is invalid: %s: Invalid value: %lld: %s", name, x, must);
        return false;
    }
    return true;
}

/* The container a request names, or the pod's only one (validateContainer upstream): NULL
 * with *ret_msg when there is none to pick. Borrowed from obj. */
static const char *pick_container(json_object *obj, const char *ctr, char **ret_msg) {
    const char *name = STR(obj, "metadata", "name");
    json_object *spec = OBJ(obj, "spec"), *cs = OBJ(spec, "containers");
    if (!ctr || !*ctr) {
        size_t n = cs && json_object_is_type(cs, json_type_array) ? json_object_array_length(cs) : 0;
        if (n == 1) return STR(json_object_array_get_idx(cs, 0), "name");
        if (n == 0) {
            *ret_msg = kite_asprintf("a container name must be specified for pod %s", name);
            return NULL;
        }
        struct kite_buf b = {0};
        static const char *const lists[] = {"initContainers", "containers", "ephemeralContainers"};
        for (size_t k = 0; k < KITE_ARRAY_SIZE(lists); k++) {
            json_object *l = OBJ(spec, lists[k]);
            for (size_t i = 0; l && json_object_is_type(l, json_type_array) && i < json_object_array_length(l); i++)
                kite_buf_printf(&b, "%s%s", b.len ? " " : "", STR(json_object_array_get_idx(l, i), "name"));
        }
        *ret_msg = kite_asprintf("a container name must be specified for pod %s, choose one of: [%s]", name, b.p ? b.p : "");
        kite_buf_release(&b);
        return NULL;
    }
    if (!has_container(cs, ctr) && !has_container(OBJ(spec, "initContainers"), ctr) &&
        !has_container(OBJ(spec, "ephemeralContainers"), ctr)) {
        *ret_msg = kite_asprintf("container %s is not valid for pod %s", ctr, name);
        return NULL;
    }
    return ctr;
}

/* pods/exec and pods/attach (ExecLocation, AttachLocation: streamLocation upstream): the
 * container, the pod's node and the agent's /exec or /attach path; the request's query goes
 * along as it came (the command is repeated in it). */
static int pod_stream(const char *what, json_object *obj, const char *(*query)(void *, const char *), void *qud,
                      char **ret_node, char **ret_path, char **ret_msg) {
    const char *name = STR(obj, "metadata", "name"), *ns = STR(obj, "metadata", "namespace");
    const char *ctr = pick_container(obj, query(qud, "container"), ret_msg);
    if (!ctr) return 400;
    const char *node = STR(obj, "spec", "nodeName");
    if (!node || !*node) {
        *ret_msg = kite_asprintf("pod %s does not have a host assigned", name);
        return 400;
    }
    *ret_node = kite_strdup(node);
    *ret_path = kite_asprintf("/%s/%s/%s/%s", what, ns, name, ctr);
    return 0;
}

static int pod_exec(json_object *obj, const char *(*query)(void *, const char *), void *qud, char **ret_node,
                    char **ret_path, char **ret_msg) {
    return pod_stream("exec", obj, query, qud, ret_node, ret_path, ret_msg);
}

static int pod_attach(json_object *obj, const char *(*query)(void *, const char *), void *qud, char **ret_node,
                      char **ret_path, char **ret_msg) {
    return pod_stream("attach", obj, query, qud, ret_node, ret_path, ret_msg);
}

/* pods/portforward (PortForwardLocation): the pod's node and the agent's /portForward path. */
static int pod_portforward(json_object *obj, const char *(*query)(void *, const char *), void *qud, char **ret_node,
                           char **ret_path, char **ret_msg) {
    const char *name = STR(obj, "metadata", "name"), *ns = STR(obj, "metadata", "namespace");
    const char *node = STR(obj, "spec", "nodeName");
    if (!node || !*node) {
        *ret_msg = kite_asprintf("pod %s does not have a host assigned", name);
        return 400;
    }
    *ret_node = kite_strdup(node);
    *ret_path = kite_asprintf("/portForward/%s/%s", ns, name);
    return 0;
}

static int pod_log(json_object *obj, const char *(*query)(void *, const char *), void *qud, char **ret_node,
                   char **ret_path, char **ret_msg) {
    const char *name = STR(obj, "metadata", "name"), *ns = STR(obj, "metadata", "namespace");
    json_object *spec = OBJ(obj, "spec"), *cs = OBJ(spec, "containers");
    const char *ctr = query(qud, "container");
    if (!ctr || !*ctr) {
        size_t n = cs && json_object_is_type(cs, json_type_array) ? json_object_array_length(cs) : 0;
        if (n == 1) {
            ctr = STR(json_object_array_get_idx(cs, 0), "name");
        } else if (n == 0) {
            *ret_msg = kite_asprintf("pod %s does not have a container", name);
            return 400;
        } else {
            struct kite_buf b = {0};
            static const char *const lists[] = {"initContainers", "containers", "ephemeralContainers"};
            for (size_t k = 0; k < KITE_ARRAY_SIZE(lists); k++) {
                json_object *l = OBJ(spec, lists[k]);
                for (size_t i = 0; l && json_object_is_type(l, json_type_array) && i < json_object_array_length(l); i++)
                    kite_buf_printf(&b, "%s%s", b.len ? " " : "", STR(json_object_array_get_idx(l, i), "name"));
            }
            *ret_msg = kite_asprintf("a container name must be specified for pod %s, choose one of: [%s]", name,
                                     b.p ? b.p : "");
            kite_buf_release(&b);
            return 400;
        }
    } else if (!has_container(cs, ctr) && !has_container(OBJ(spec, "initContainers"), ctr) &&
               !has_container(OBJ(spec, "ephemeralContainers"), ctr)) {
        *ret_msg = kite_asprintf("container %s is not valid for pod %s", ctr, name);
        return 400;
    }
    if (!log_int(query, qud, "tailLines", 0, "must be greater than or equal to 0", ret_msg) ||
        !log_int(query, qud, "limitBytes", 1, "must be greater than 0", ret_msg) ||
        !log_int(query, qud, "sinceSeconds", 1, "must be greater than 0", ret_msg))
        return 400;
    const char *since_time = query(qud, "sinceTime");
    int64_t sec;
    int32_t nsec;
    if (since_time && query(qud, "sinceSeconds")) {
        *ret_msg = kite_strdup("PodLogOptions \"\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified");
        return 422;
    }
    if (since_time && kite_gotime_parse(since_time, false, &sec, &nsec, NULL) < 0) {
        *ret_msg = kite_asprintf("parsing time \"%s\" as \"2006-01-02T15:04:05Z07:00\": cannot parse", since_time);
        return 400;
    }
    const char *node = STR(spec, "nodeName");
    if (!node || !*node) {
        *ret_msg = kite_asprintf("pod %s does not have a host assigned", name);
        return 400;
    }
    bool previous = kite_streq(query(qud, "previous"), "true");
    json_object *st = log_container_status(obj, ctr);
    if (previous) {
        if (!OBJ(st, "lastState", "terminated")) {
            *ret_msg = kite_asprintf("previous terminated container \"%s\" in pod \"%s\" not found", ctr, name);
            return 400;
        }
    } else if (!OBJ(st, "state", "running") && !OBJ(st, "state", "terminated") && !OBJ(st, "lastState", "terminated")) {
        const char *why = STR(st, "state", "waiting", "reason");
        if (!why || !*why) why = "ContainerCreating";
        if (kite_streq(why, "ErrImagePull")) why = "image can't be pulled";
        else if (kite_streq(why, "ImagePullBackOff")) why = "trying and failing to pull image";
        *ret_msg = kite_asprintf("container \"%s\" in pod \"%s\" is waiting to start: %s", ctr, name, why);
        return 400;
    }
    struct kite_buf p = {0};
    kite_buf_printf(&p, "/containerLogs/%s/%s/%s", ns, name, ctr);
    static const char *const params[] = {"follow", "previous", "timestamps", "tailLines", "limitBytes", "sinceSeconds",
                                         "sinceTime"};
    char sep = '?';
    for (size_t i = 0; i < KITE_ARRAY_SIZE(params); i++) {
        const char *v = query(qud, params[i]);
        if (!v) continue;
        kite_buf_printf(&p, "%c%s=", sep, params[i]);
        sep = '&';
        kite_buf_query_value(&p, v);
    }
    *ret_node = kite_strdup(node);
    *ret_path = kite_buf_detach(&p, NULL);
    return 0;
}

/* An evicted pod says why it goes (upstream's addConditionAndDeletePod): DisruptionTarget
 * True, EvictionByEvictionAPI, set or replaced in status.conditions. */
static void pod_evict_mark(json_object *obj, int64_t now_ns) {
    json_object *status = kite_obj_ensure(obj, "status");
    json_object *conds = kite_obj_get(status, "conditions");
    if (!conds || !json_object_is_type(conds, json_type_array)) {
        conds = json_object_new_array();
        kite_obj_set(status, "conditions", conds);
    }
    json_object *c = NULL;
    for (size_t i = 0; i < arr_len(conds) && !c; i++)
        if (strcmp(STR(json_object_array_get_idx(conds, i), "type"), "DisruptionTarget") == 0) c = json_object_array_get_idx(conds, i);
    if (!c) {
        c = json_object_new_object();
        json_object_array_add(conds, c);
    }
    if (strcmp(STR(c, "status"), "True") != 0 || !*STR(c, "lastTransitionTime")) {
        char ts[21];
        kite_time_format(now_ns, ts);
        kite_obj_set(c, "lastTransitionTime", json_object_new_string(ts));
    }
    kite_obj_set(c, "type", json_object_new_string("DisruptionTarget"));
    kite_obj_set(c, "status", json_object_new_string("True"));
    kite_obj_set(c, "reason", json_object_new_string("EvictionByEvictionAPI"));
    kite_obj_set(c, "message", json_object_new_string("Eviction API: evicting"));
}

/* policy/v1 Eviction, the body of pods/eviction (protobuf bodies decode by it) */
ROOT(kite_schema_eviction, "Eviction", TYPE_META, F(2, "deleteOptions", kite_schema_delete_options));

static const struct kite_subresource subresources[] = {
    {.name = "binding", .body_group = "", .body_version = "v1", .body_kind = "Binding", .act = pod_bind},
    {.name = "eviction", .body_group = "policy", .body_version = "v1", .body_kind = "Eviction", .deletes = true,
     .body_schema = &kite_schema_eviction,
     .guard_group = "policy", .guard_plural = "poddisruptionbudgets", .guard = kite_pdb_evict, .mark = pod_evict_mark},
    {.name = "log", .connect = pod_log},
    /* kubectl debug's: a write changes spec.ephemeralContainers alone (validate_ephemeral) */
    {.name = "ephemeralcontainers", .field = "spec.ephemeralContainers"},
    {.name = "exec", .connect = pod_exec, .upgrade = true, .body_group = "", .body_version = "v1",
     .body_kind = "PodExecOptions"},
    {.name = "attach", .connect = pod_attach, .upgrade = true, .body_group = "", .body_version = "v1",
     .body_kind = "PodAttachOptions"},
    {.name = "portforward", .connect = pod_portforward, .upgrade = true, .body_group = "", .body_version = "v1",
     .body_kind = "PodPortForwardOptions"},
    {0},
};

static bool pod_condition_true(json_object *obj, const char *type) {
    json_object *conds = OBJ(obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), type) == 0) return strcmp(STR(c, "status"), "True") == 0;
    }
    return false;
}

static json_object *spec_init_container(json_object *obj, const char *name) {
    json_object *ics = OBJ(obj, "spec", "initContainers");
    for (size_t i = 0; i < arr_len(ics); i++) {
        json_object *c = json_object_array_get_idx(ics, i);
        if (strcmp(STR(c, "name"), name) == 0) return c;
    }
    return NULL;
}
static bool restartable(json_object *spec_container) {
    return spec_container && strcmp(STR(spec_container, "restartPolicy"), "Always") == 0;
}
static bool is_true(json_object *o) { return o && json_object_is_type(o, json_type_boolean) && json_object_get_boolean(o); }

/* Latest of *latest and the container's lastState.terminated.finishedAt (RFC 3339 strings
 * of one format compare in time order only after parsing). */
static void track_restart(json_object *cs, int64_t *latest_ns) {
    const char *t = STR(cs, "lastState", "terminated", "finishedAt");
    int64_t ns;
    if (*t && kite_time_parse(t, &ns) == 0 && ns > *latest_ns) *latest_ns = ns;
}

/* A terminated state with no reason reads "Signal:N" or "ExitCode:N" (prefix "Init:" for init). */
static void terminated_reason(json_object *term, const char *prefix, struct kite_buf *reason) {
    kite_buf_reset(reason);
    if (*STR(term, "reason"))
        kite_buf_printf(reason, "%s%s", prefix, STR(term, "reason"));
    else if (int_of(OBJ(term, "signal")))
        kite_buf_printf(reason, "%sSignal:%lld", prefix, (long long)int_of(OBJ(term, "signal")));
    else
        kite_buf_printf(reason, "%sExitCode:%lld", prefix, (long long)int_of(OBJ(term, "exitCode")));
}

/* The Ready, Status and Restarts cells come out of one walk over the container statuses
 * (printPod). */
struct pod_row {
    struct kite_buf reason;
    int64_t ready, total, restarts, last_restart;
};

static void pod_prepare(const struct kite_table_row *r) {
    struct pod_row *row = r->scratch;
    json_object *obj = r->obj;
    struct kite_buf reason = {0};
    int64_t restarts = 0, init_restarts = 0, ready = 0;
    int64_t last_restart = INT64_MIN, last_init_restart = INT64_MIN;
    json_object *init_specs = OBJ(obj, "spec", "initContainers");
    size_t n_init = arr_len(init_specs);
    int64_t total = (int64_t)arr_len(OBJ(obj, "spec", "containers"));
    for (size_t i = 0; i < n_init; i++)
        if (restartable(json_object_array_get_idx(init_specs, i))) total++;

    const char *phase = STR(obj, "status", "phase");
    kite_buf_puts(&reason, *STR(obj, "status", "reason") ? STR(obj, "status", "reason") : phase);
    json_object *conds = OBJ(obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), "PodScheduled") == 0 && strcmp(STR(c, "reason"), "SchedulingGated") == 0) {
            kite_buf_reset(&reason);
            kite_buf_puts(&reason, "SchedulingGated");
        }
    }

    bool initializing = false;
    json_object *ics = OBJ(obj, "status", "initContainerStatuses");
    for (size_t i = 0; i < arr_len(ics); i++) {
        json_object *cs = json_object_array_get_idx(ics, i);
        restarts += int_of(OBJ(cs, "restartCount"));
        track_restart(cs, &last_restart);
        bool sidecar = restartable(spec_init_container(obj, STR(cs, "name")));
        if (sidecar) {
            init_restarts += int_of(OBJ(cs, "restartCount"));
            track_restart(cs, &last_init_restart);
        }
        json_object *term = OBJ(cs, "state", "terminated");
        const char *waiting = STR(cs, "state", "waiting", "reason");
        if (term && int_of(OBJ(term, "exitCode")) == 0) continue;
        if (sidecar && is_true(OBJ(cs, "started"))) {
            if (is_true(OBJ(cs, "ready"))) ready++;
            continue;
        }
        if (term) {
            terminated_reason(term, "Init:", &reason);
        } else if (*waiting && strcmp(waiting, "PodInitializing") != 0) {
            kite_buf_reset(&reason);
            kite_buf_printf(&reason, "Init:%s", waiting);
        } else {
            kite_buf_reset(&reason);
            kite_buf_printf(&reason, "Init:%zu/%zu", i, n_init);
        }
        initializing = true;
        break;
    }

    if (!initializing || pod_condition_true(obj, "Initialized")) {
        restarts = init_restarts;
        last_restart = last_init_restart;
        bool has_running = false;
        json_object *css = OBJ(obj, "status", "containerStatuses");
        for (size_t i = arr_len(css); i-- > 0;) {
            json_object *cs = json_object_array_get_idx(css, i);
            restarts += int_of(OBJ(cs, "restartCount"));
            track_restart(cs, &last_restart);
            json_object *term = OBJ(cs, "state", "terminated");
            const char *waiting = STR(cs, "state", "waiting", "reason");
            if (*waiting) {
                kite_buf_reset(&reason);
                kite_buf_puts(&reason, waiting);
            } else if (term) {
                terminated_reason(term, "", &reason);
            } else if (is_true(OBJ(cs, "ready")) && OBJ(cs, "state", "running")) {
                has_running = true;
                ready++;
            }
        }
        if (strcmp(reason.p, "Completed") == 0 && has_running) {
            kite_buf_reset(&reason);
            kite_buf_puts(&reason, pod_condition_true(obj, "Ready") ? "Running" : "NotReady");
        }
    }

    bool deleting = *STR(obj, "metadata", "deletionTimestamp") != 0;
    if (deleting && strcmp(STR(obj, "status", "reason"), "NodeLost") == 0) {
        kite_buf_reset(&reason);
        kite_buf_puts(&reason, "Unknown");
    } else if (deleting && strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0) {
        kite_buf_reset(&reason);
        kite_buf_puts(&reason, "Terminating");
    }

    *row = (struct pod_row){reason, ready, total, restarts, last_restart};
}

static void pod_release(void *scratch) { kite_buf_release(&((struct pod_row *)scratch)->reason); }

static json_object *pod_ready(const struct kite_table_row *r) {
    const struct pod_row *row = r->scratch;
    char buf[48];
    snprintf(buf, sizeof(buf), "%lld/%lld", (long long)row->ready, (long long)row->total);
    return cell_str(buf);
}

static json_object *pod_status(const struct kite_table_row *r) { return cell_str(((struct pod_row *)r->scratch)->reason.p); }

/* "N" or "N (<age of the last restart> ago)" */
static json_object *pod_restarts(const struct kite_table_row *r) {
    const struct pod_row *row = r->scratch;
    char buf[64];
    if (row->restarts != 0 && row->last_restart != INT64_MIN) {
        char ago[32];
        since_ns(row->last_restart, r->now_s, ago);
        snprintf(buf, sizeof(buf), "%lld (%s ago)", (long long)row->restarts, ago);
    } else {
        snprintf(buf, sizeof(buf), "%lld", (long long)row->restarts);
    }
    return cell_str(buf);
}

static json_object *pod_ip(const struct kite_table_row *r) {
    json_object *ips = OBJ(r->obj, "status", "podIPs");
    return cell_or(arr_len(ips) ? STR(json_object_array_get_idx(ips, 0), "ip") : STR(r->obj, "status", "podIP"), "<none>");
}
static json_object *pod_node(const struct kite_table_row *r) { return cell_or(STR(r->obj, "spec", "nodeName"), "<none>"); }
static json_object *pod_nominated_node(const struct kite_table_row *r) {
    return cell_or(STR(r->obj, "status", "nominatedNodeName"), "<none>");
}

/* "<true gates>/<gates>" */
static json_object *pod_readiness_gates(const struct kite_table_row *r) {
    json_object *gates = OBJ(r->obj, "spec", "readinessGates");
    if (!arr_len(gates)) return cell_str("<none>");
    size_t ok = 0;
    for (size_t i = 0; i < arr_len(gates); i++)
        if (pod_condition_true(r->obj, STR(json_object_array_get_idx(gates, i), "conditionType"))) ok++;
    char buf[48];
    snprintf(buf, sizeof(buf), "%zu/%zu", ok, arr_len(gates));
    return cell_str(buf);
}

static const struct kite_table_column pod_cols[] = {
    COL_NAME,
    {"Ready", pod_ready, "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0},
    {"Status", pod_status, "string", "", "The aggregate status of the containers in this pod.", 0},
    {"Restarts", pod_restarts, "string", "",
     "The number of times the containers in this pod have been restarted and when the last container in this pod "
     "has restarted.",
     0},
    COL_AGE,
    {"IP", pod_ip, "string", "", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1},
    {"Node", pod_node, "string", "",
     "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply "
     "schedules this pod onto that node, assuming that it fits resource requirements.",
     1},
    {"Nominated Node", pod_nominated_node, "string", "",
     "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot schedule right "
     "away as preemption victims receive their graceful termination periods. This field does not guarantee that "
     "the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes "
     "become available sooner. Scheduler may also decide to give the resources on this node to a higher priority "
     "pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when "
     "the pod is scheduled.",
     1},
    {"Readiness Gates", pod_readiness_gates, "string", "",
     "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
     "containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" "
     "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
     1},
};

static const struct kite_table_printer printer =
    TABLE_PRINTER(pod_cols, .scratch_size = sizeof(struct pod_row), .prepare = pod_prepare, .release = pod_release);

const struct kite_resource kite_kind_pod = {
    .schema = &kite_schema_pod,
    KITE_CORE_V1, .kind = "Pod", .list_kind = "PodList", .plural = "pods", .singular = "pod",
    .short_names = {"po"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .status_keeps_meta = {"ownerReferences"}, /* old kubelets corrupted them, breaking garbage collection */
    .unconditional_update = true, .delete_returns_object = true, .smp = &smp, .table = &printer,
    .fields = fields, .defaults = pod_defaults, .validate = pod_validate, .subresources = subresources,
    .delete_grace = pod_delete_grace, .default_tolerations = pod_default_tolerations, .pod_template = "",
};

/* ---- the pod template of workloads (core/v1 PodTemplateSpec; workload.h) ---- */

ROOT(kite_schema_pod_template_spec, "PodTemplateSpec", F(1, "metadata", kite_schema_object_meta), F(2, "spec", pod_spec));

/* SetDefaults_PodSpec and the containers' defaults, as on a pod; what only a pod gets (its
 * status, and the spec fields SetDefaults_Pod and the Priority admission plugin give a pod) is
 * not added: the template is hashed (pod-template-hash) as upstream stores it. */
void kite_pod_template_defaults(json_object *tmpl) {
    if (!is_obj(tmpl)) return;
    static const char *const pod_only[] = {"enableServiceLinks", "priority", "preemptionPolicy"};
    json_object *spec = kite_obj_ensure(tmpl, "spec");
    bool had[KITE_ARRAY_SIZE(pod_only)];
    for (size_t i = 0; i < KITE_ARRAY_SIZE(pod_only); i++) had[i] = kite_obj_get(spec, pod_only[i]) != NULL;
    bool had_status = kite_obj_get(tmpl, "status") != NULL;
    pod_defaults(tmpl);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(pod_only); i++)
        if (!had[i]) json_object_object_del(spec, pod_only[i]);
    if (!had_status) json_object_object_del(tmpl, "status");
}

/* ValidatePodTemplateSpec's spec part: a pod's checks, their fields under path ("spec.template"). */
void kite_pod_template_validate(json_object *tmpl, const char *path, struct kite_causes *c) {
    struct kite_causes own = {0};
    pod_validate(tmpl, NULL, &own);
    for (size_t i = 0; i < own.n; i++) {
        _cleanup_free_ char *field = kite_asprintf("%s.%s", path, own.v[i].field);
        kite_causes_add(c, own.v[i].reason, field, "%s", own.v[i].message);
    }
    kite_causes_release(&own);
}
