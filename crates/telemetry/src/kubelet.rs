//! Which pods the kubelet gave which devices, from its pod-resources API: `List` of
//! `v1.PodResourcesLister`, gRPC on a unix socket (`/var/lib/kubelet/pod-resources/kubelet.sock`,
//! root's), over this crate's own small gRPC client. The same source dcgm-exporter reads.
//!
//! The answer names each pod (namespace, name), its containers and the device IDs each
//! container was given per resource (`nvidia.com/gpu`: `GPU-...` UUIDs, `MIG-...` for MIG
//! instances, `GPU-...::N` for time-sliced replicas; `amd.com/gpu`: PCI addresses; Intel's
//! `gpu.intel.com/i915`: `cardN-M`). [`holds`] matches an ID to a reading. A device a pod holds
//! is not free even while the pod runs no process on it ([`crate::pick()`]).
//!
//! What it cannot say: the API names no pod UID and no container ID, so a process (which the
//! cgroup ties to a pod UID) gets the pod's names only when exactly one container holds its
//! device (`attribute`); when several pods share one device, each is listed as an owner of
//! the device and the process keeps its UID.

use std::path::Path;
use std::time::{Duration, Instant};

use super::grpc::{self, CallError};
use super::proto::{fields, Field};
pub use super::reading::{Owner, DEFAULT_POD_RESOURCES_SOCKET as DEFAULT_SOCKET};
use super::reading::{Reading, Vendor};

/// How long one `List` may take. The kubelet answers from memory, in milliseconds.
pub const DEADLINE: Duration = Duration::from_secs(1);
const LIST: &str = "/v1.PodResourcesLister/List";

/// One container's devices of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allocation {
    /// Who holds them.
    pub(crate) owner: Owner,
    /// The device plugin's IDs of the devices.
    pub(crate) device_ids: Vec<String>,
}

/// Asks the kubelet at `socket` which containers hold which devices. `Err` says why in words
/// (no socket, permission denied, timed out, a malformed answer).
pub(crate) fn list_pod_resources(
    socket: &Path,
    timeout: Duration,
) -> Result<Vec<Allocation>, String> {
    #[cfg(unix)]
    {
        let answers = grpc::unary_calls(
            grpc::Endpoint::Unix(socket),
            LIST,
            &[Vec::new()],
            Instant::now() + timeout,
        )
        .map_err(|e| match e {
            CallError::NoAnswer(s) => s,
            CallError::Protocol(s) => format!("the kubelet's answer is not valid gRPC: {s}"),
        })?;
        match answers.into_iter().next() {
            Some(Ok(msg)) => decode_list_response(&msg),
            Some(Err(e)) => Err(format!("List failed: {e}")),
            None => Err("no answer to List".to_string()),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (socket, timeout, Instant::now());
        Err("the kubelet's pod-resources API is a unix socket".to_string())
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Decodes a `ListPodResourcesResponse` { repeated PodResources pod_resources = 1 { string name
/// = 1; string namespace = 2; repeated ContainerResources containers = 3 { string name = 1;
/// repeated ContainerDevices devices = 2 { string resource_name = 1; repeated string device_ids
/// = 2 } } } } into one allocation per container and resource; containers without devices are
/// left out, other fields (CPUs, memory, dynamic resources) skipped. Malformed bytes are an
/// error.
pub(crate) fn decode_list_response(buf: &[u8]) -> Result<Vec<Allocation>, String> {
    let mut out = Vec::new();
    let mut f = fields(buf);
    while let Some(r) = f.next_field() {
        let (1, Field::Bytes(pod)) = r? else {
            continue;
        };
        let (mut name, mut namespace) = (String::new(), String::new());
        let mut containers: Vec<&[u8]> = Vec::new();
        let mut g = fields(pod);
        while let Some(r) = g.next_field() {
            match r? {
                (1, Field::Bytes(b)) => name = text(b),
                (2, Field::Bytes(b)) => namespace = text(b),
                (3, Field::Bytes(b)) => containers.push(b),
                _ => {}
            }
        }
        for c in containers {
            let mut container = String::new();
            let mut devices: Vec<(String, Vec<String>)> = Vec::new();
            let mut h = fields(c);
            while let Some(r) = h.next_field() {
                match r? {
                    (1, Field::Bytes(b)) => container = text(b),
                    (2, Field::Bytes(d)) => {
                        let (mut resource, mut ids) = (String::new(), Vec::new());
                        let mut k = fields(d);
                        while let Some(r) = k.next_field() {
                            match r? {
                                (1, Field::Bytes(b)) => resource = text(b),
                                (2, Field::Bytes(b)) => ids.push(text(b)),
                                _ => {}
                            }
                        }
                        devices.push((resource, ids));
                    }
                    _ => {}
                }
            }
            for (resource, device_ids) in devices {
                if device_ids.is_empty() {
                    continue;
                }
                out.push(Allocation {
                    owner: Owner {
                        namespace: namespace.clone(),
                        pod: name.clone(),
                        container: container.clone(),
                        resource,
                    },
                    device_ids,
                });
            }
        }
    }
    Ok(out)
}

/// A PCI address with its domain, lower case (`03:00.0` -> `0000:03:00.0`; NVML's
/// `00000000:03:00.0` -> `0000:03:00.0`).
fn pci_address(s: &str) -> Option<String> {
    let s = s.to_ascii_lowercase();
    let parts: Vec<&str> = s.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [b, df] => ("0000", *b, *df),
        [d, b, df] => (*d, *b, *df),
        _ => return None,
    };
    let (dev, func) = devfn.split_once('.')?;
    let hex = |x: &str, n: usize| {
        x.len() <= n && !x.is_empty() && x.bytes().all(|c| c.is_ascii_hexdigit())
    };
    if !(hex(domain, 8) && hex(bus, 2) && hex(dev, 2) && func.len() == 1 && hex(func, 1)) {
        return None;
    }
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some(format!("{domain:04x}:{bus:0>2}:{dev:0>2}.{func}"))
}

/// Whether the device plugin's ID `id` names the device `r`: its UUID (a time-sliced replica's
/// `::N` suffix dropped), its PCI address, or for a DRM card its `cardN` (`cardN-M`, Intel's
/// shared devices).
pub fn holds(id: &str, r: &Reading) -> bool {
    let id = id.split("::").next().unwrap_or(id).trim();
    if id.is_empty() {
        return false;
    }
    if r.uuid
        .as_deref()
        .is_some_and(|u| u.eq_ignore_ascii_case(id))
    {
        return true;
    }
    if r.mig_index.is_none() {
        if let (Some(a), Some(b)) = (pci_address(id), r.pci_bus_id.as_deref()) {
            if pci_address(b).as_deref() == Some(a.as_str()) {
                return true;
            }
        }
    }
    if matches!(r.vendor, Vendor::Amd | Vendor::Intel) {
        if let Some(rest) = id.strip_prefix("card") {
            let n = rest.split_once('-').map_or(rest, |(n, _)| n);
            let share_ok = rest
                .split_once('-')
                .is_none_or(|(_, m)| !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()));
            return share_ok && n.parse::<u32>().ok() == Some(r.index);
        }
    }
    false
}

/// Gives each reading the containers that hold it (`Reading::owners`), and its processes that
/// run in a pod the names of the one container that holds the device, when exactly one does
/// and the processes are all of one pod; otherwise those processes get a note saying why not.
pub(crate) fn attribute(devices: &mut [Reading], allocations: &[Allocation]) {
    for r in devices.iter_mut() {
        let mut owners: Vec<Owner> = allocations
            .iter()
            .filter(|a| a.device_ids.iter().any(|id| holds(id, r)))
            .map(|a| a.owner.clone())
            .collect();
        owners.sort();
        owners.dedup();
        let id = r.id();
        // The pods (by UID, from the cgroups) with a process on the device. Names go to them
        // only when one container holds the device and the processes are all of one pod: the
        // kubelet names no UID, so with two pods on the device the names could be the other's.
        let mut uids: Vec<&str> = r
            .processes
            .iter()
            .filter_map(|p| p.workload.as_ref()?.pod_uid.as_deref())
            .collect();
        uids.sort_unstable();
        uids.dedup();
        let (one, pods) = (owners.len() == 1, uids.len());
        for p in &mut r.processes {
            let Some(w) = p.workload.as_mut().filter(|w| w.pod_uid.is_some()) else {
                continue;
            };
            if one && pods == 1 {
                w.namespace = Some(owners[0].namespace.clone());
                w.pod = Some(owners[0].pod.clone());
                w.container = Some(owners[0].container.clone());
            } else if !owners.is_empty() && p.note.is_none() {
                p.note = Some(format!(
                    "{} container(s) hold {id} and {pods} pod(s) run on it; the kubelet names no pod UID, so this process's pod name is not known",
                    owners.len()
                ));
            }
        }
        r.owners = owners;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::put_varint;

    fn field(out: &mut Vec<u8>, n: u64, b: &[u8]) {
        put_varint(out, n << 3 | 2);
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    /// A `ListPodResourcesResponse` made by hand from the field numbers of the upstream
    /// api.proto, with fields this decoder skips (cpu_ids packed, a topology, an unknown
    /// varint).
    /// A container: its name and its devices as (resource, IDs).
    type Ctr<'a> = (&'a str, &'a [(&'a str, &'a [&'a str])]);

    fn response(pods: &[(&str, &str, &[Ctr<'_>])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (ns, name, containers) in pods {
            let mut p = Vec::new();
            field(&mut p, 1, name.as_bytes());
            field(&mut p, 2, ns.as_bytes());
            for (cname, devices) in *containers {
                let mut c = Vec::new();
                field(&mut c, 1, cname.as_bytes());
                for (res, ids) in *devices {
                    let mut d = Vec::new();
                    field(&mut d, 1, res.as_bytes());
                    for id in *ids {
                        field(&mut d, 2, id.as_bytes());
                    }
                    field(&mut d, 3, &[0x0a, 0x02, 0x08, 0x01]); // topology { nodes { ID: 1 } }
                    field(&mut c, 2, &d);
                }
                field(&mut c, 3, &[0x02, 0x04]); // cpu_ids [2, 4], packed
                put_varint(&mut c, 9 << 3);
                put_varint(&mut c, 300);
                field(&mut p, 3, &c);
            }
            field(&mut out, 1, &p);
        }
        out
    }

    #[test]
    fn decodes_pods_containers_and_devices() {
        let buf = response(&[
            (
                "ml",
                "trainer-0",
                &[
                    ("main", &[("nvidia.com/gpu", &["GPU-aaaa", "GPU-bbbb"])]),
                    ("sidecar", &[]),
                ],
            ),
            (
                "default",
                "notebook",
                &[("jupyter", &[("amd.com/gpu", &["0000:03:00.0"])])],
            ),
        ]);
        let a = decode_list_response(&buf).unwrap();
        assert_eq!(a.len(), 2, "{a:#?}");
        assert_eq!(a[0].owner.short(), "ml/trainer-0 (main)");
        assert_eq!(a[0].owner.resource, "nvidia.com/gpu");
        assert_eq!(a[0].device_ids, ["GPU-aaaa", "GPU-bbbb"]);
        assert_eq!(a[1].owner.short(), "default/notebook (jupyter)");
        assert_eq!(a[1].device_ids, ["0000:03:00.0"]);
        assert_eq!(decode_list_response(&[]).unwrap(), vec![]);
        // Truncated or malformed: an error, not a panic.
        for cut in 1..buf.len() {
            let _ = decode_list_response(&buf[..cut]);
        }
        assert!(decode_list_response(&[0x0a, 0x7f]).is_err());
    }

    #[test]
    fn pci_addresses_compare_in_one_form() {
        assert_eq!(pci_address("03:00.0").as_deref(), Some("0000:03:00.0"));
        assert_eq!(
            pci_address("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(pci_address("0001:c1:00.1").as_deref(), Some("0001:c1:00.1"));
        for bad in [
            "GPU-1234",
            "card0",
            "0000:03:00",
            "zz:00.0",
            "0000:03:00.12",
            "",
        ] {
            assert_eq!(pci_address(bad), None, "{bad}");
        }
    }

    #[test]
    fn device_ids_name_devices_by_uuid_pci_address_or_card() {
        let mut nv = Reading::new(Vendor::Nvidia, 1, "NVIDIA T4");
        nv.uuid = Some("GPU-5a2f0c1e-0000-1111-2222-333344445555".into());
        nv.pci_bus_id = Some("0000:3b:00.0".into());
        assert!(holds("GPU-5a2f0c1e-0000-1111-2222-333344445555", &nv));
        assert!(holds("gpu-5a2f0c1e-0000-1111-2222-333344445555::3", &nv));
        assert!(holds("0000:3B:00.0", &nv));
        assert!(!holds("GPU-5a2f0c1e", &nv));
        assert!(!holds("card1", &nv), "NVIDIA's plugin never names cards");
        assert!(!holds("", &nv));
        let mut mig = Reading::new(Vendor::Nvidia, 1, "NVIDIA H200 MIG 1g.18gb");
        mig.uuid = Some("MIG-0d9e".into());
        mig.pci_bus_id = nv.pci_bus_id.clone();
        mig.mig_index = Some(0);
        assert!(holds("MIG-0d9e", &mig));
        assert!(
            !holds("0000:3b:00.0", &mig),
            "the whole GPU's address is not its instance"
        );
        let mut amd = Reading::new(Vendor::Amd, 2, "AMD Instinct MI300X");
        amd.pci_bus_id = Some("0000:c1:00.0".into());
        assert!(holds("0000:c1:00.0", &amd));
        assert!(holds("card2", &amd));
        let intel = Reading::new(Vendor::Intel, 0, "Intel Arc A770");
        assert!(holds("card0-1", &intel));
        assert!(!holds("card0-", &intel));
        assert!(!holds("card1-0", &intel));
        assert!(!holds("card0x", &intel));
    }

    #[test]
    fn processes_get_names_only_when_one_container_holds_their_device() {
        use crate::workload::from_cgroup_file;
        use crate::ProcessUse;
        let pod = "0::/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice/cri-containerd-1f2e3d4c5b6a79880716253443526170a1b2c3d4e5f60718293a4b5c6d7e8f90.scope\n";
        let proc_in = |w: &str| ProcessUse {
            pid: 7,
            workload: Some(from_cgroup_file(w)),
            ..Default::default()
        };
        let mut a = Reading::new(Vendor::Amd, 0, "AMD");
        a.pci_bus_id = Some("0000:03:00.0".into());
        a.processes = vec![proc_in(pod), proc_in("0::/user.slice/session-3.scope\n")];
        let mut b = a.clone();
        b.index = 1;
        b.pci_bus_id = Some("0000:04:00.0".into());
        let mut c = a.clone();
        c.index = 2;
        c.pci_bus_id = Some("0000:05:00.0".into());
        let alloc = |ns: &str, pod: &str, ids: &[&str]| Allocation {
            owner: Owner {
                namespace: ns.into(),
                pod: pod.into(),
                container: "main".into(),
                resource: "amd.com/gpu".into(),
            },
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
        };
        let allocs = [
            alloc("ml", "one", &["0000:03:00.0"]),
            alloc("ml", "two", &["0000:04:00.0"]),
            alloc("ml", "three", &["0000:04:00.0"]),
        ];
        let mut devs = [a, b, c];
        attribute(&mut devs, &allocs);
        let w = |d: &Reading, i: usize| d.processes[i].workload.clone().unwrap();
        assert_eq!(devs[0].owners.len(), 1);
        assert_eq!(w(&devs[0], 0).pod.as_deref(), Some("one"));
        assert_eq!(w(&devs[0], 0).namespace.as_deref(), Some("ml"));
        assert_eq!(w(&devs[0], 0).container.as_deref(), Some("main"));
        assert_eq!(w(&devs[0], 1).pod, None, "a session is not in a pod");
        assert_eq!(devs[1].owners.len(), 2);
        assert_eq!(w(&devs[1], 0).pod, None, "two pods hold it: not named");
        assert!(devs[1].processes[0]
            .note
            .as_deref()
            .unwrap()
            .contains("2 container(s) hold amd:1"));
        assert!(devs[2].owners.is_empty());
        assert_eq!(w(&devs[2], 0).pod, None);
        assert_eq!(devs[2].processes[0].note, None);
        // One owner, but processes of two pods: which pod is the owner is not known.
        let mut d = devs[0].clone();
        let other = "0::/kubepods.slice/kubepods-pod3f2a6b1c_7d8e_4f90_a1b2_c3d4e5f60718.slice/cri-containerd-9c1e0f7d3b2a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5.scope\n";
        d.processes = vec![proc_in(pod), proc_in(other)];
        let mut devs = [d];
        attribute(&mut devs, &allocs);
        assert_eq!(w(&devs[0], 0).pod, None);
        assert_eq!(w(&devs[0], 1).pod, None);
        assert!(devs[0].processes[1]
            .note
            .as_deref()
            .unwrap()
            .contains("2 pod(s)"));
    }
}
