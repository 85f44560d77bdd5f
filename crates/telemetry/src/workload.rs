//! Whose work a process is: the container, Kubernetes pod, Slurm job or systemd unit it runs
//! in, named from its cgroup (`PROCFS/PID/cgroup`), for every vendor's process rows.
//!
//! The cgroup path is the one thing every runtime writes where a monitor can read it without
//! asking the runtime. The layouts read here are the runtimes' documented ones:
//! - cgroup v2 has one line, `0::/PATH`; cgroup v1 one line per hierarchy
//!   (`N:CONTROLLERS:/PATH`), of which the first of `name=systemd`, `pids`, `memory`, `cpu`
//!   and `cpuset` that names a workload is used (Slurm's v1 plugin writes only its own
//!   controllers).
//! - Kubernetes, systemd driver: `kubepods.slice/kubepods-QOS.slice/kubepods-QOS-podUID.slice/
//!   RUNTIME-ID.scope` (the UID's dashes written as `_`; Guaranteed pods have no QoS level);
//!   cgroupfs driver: `kubepods/QOS/podUID/ID`.
//! - Docker (`docker-ID.scope`, `docker/ID`), containerd (`cri-containerd-ID.scope`), CRI-O
//!   (`crio-ID.scope`, `crio/ID`), podman (`libpod-ID.scope`, rootless under `user@UID.service`).
//! - Slurm: cgroup v1 `slurm/uid_UID/job_JOB/step_STEP/...`, cgroup v2
//!   `system.slice/slurmstepd.scope/job_JOB/step_STEP/...`.
//! - Otherwise the innermost systemd unit (`ssh.service`, `session-3.scope`).

use std::path::Path;

use serde::Serialize;

/// What a process runs in. Every field is `None` where its cgroup does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Workload {
    /// The container's ID (64 hex digits), when the process is in a container.
    pub container_id: Option<String>,
    /// The container runtime that made it: `docker`, `containerd`, `cri-o` or `podman`.
    pub runtime: Option<String>,
    /// The Kubernetes pod's UID, with dashes (`kubectl get pod -o jsonpath='{.metadata.uid}'`).
    pub pod_uid: Option<String>,
    /// The pod's QoS class: `guaranteed`, `burstable` or `besteffort`.
    pub qos_class: Option<String>,
    /// The Slurm job ID.
    pub slurm_job: Option<u64>,
    /// The Slurm step: a number, `batch`, `extern` or `interactive`.
    pub slurm_step: Option<String>,
    /// The innermost systemd unit that is not a container's (`ssh.service`, `session-3.scope`).
    pub unit: Option<String>,
    /// The pod's namespace, from the kubelet's pod-resources API (`kubelet::attribute`): known
    /// when exactly one container holds the process's device.
    pub namespace: Option<String>,
    /// The pod's name, from the kubelet, as `namespace`.
    pub pod: Option<String>,
    /// The container's name, from the kubelet, as `namespace`.
    pub container: Option<String>,
    /// The cgroup path these were read from.
    pub cgroup: String,
}

impl Workload {
    /// One short name for tables: `pod ml/trainer-0 (main)` when the kubelet named it, else
    /// `pod 3f2a.../9c1e...`; `job 1234.0`, `docker 9c1e...`, the unit, or `-`.
    pub fn short(&self) -> String {
        let id = |s: &String, n: usize| s.chars().take(n).collect::<String>();
        if let (Some(ns), Some(pod), Some(c)) = (&self.namespace, &self.pod, &self.container) {
            return format!("pod {ns}/{pod} ({c})");
        }
        if let Some(job) = self.slurm_job {
            return match &self.slurm_step {
                Some(s) => format!("job {job}.{s}"),
                None => format!("job {job}"),
            };
        }
        match (&self.pod_uid, &self.container_id) {
            (Some(p), Some(c)) => return format!("pod {}/{}", id(p, 8), id(c, 12)),
            (Some(p), None) => return format!("pod {}", id(p, 8)),
            (None, Some(c)) => {
                return format!(
                    "{} {}",
                    self.runtime.as_deref().unwrap_or("container"),
                    id(c, 12)
                )
            }
            (None, None) => {}
        }
        self.unit.clone().unwrap_or_else(|| "-".into())
    }
}

/// The workload of process `pid`, from `PROCFS/PID/cgroup`; `None` when that cannot be read
/// (the process ended, or is not in this PID namespace).
pub fn of_process(procfs: &Path, pid: u32) -> Option<Workload> {
    let text = accelkit_core::files::read_text_limited(
        &procfs.join(pid.to_string()).join("cgroup"),
        1 << 16,
    )
    .ok()?;
    Some(from_cgroup_file(&text))
}

/// The workload named by the text of a `/proc/PID/cgroup` file.
pub fn from_cgroup_file(text: &str) -> Workload {
    let mut v2 = None;
    let mut v1: Vec<(&str, &str)> = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        } else {
            v1.push((controllers, path));
        }
    }
    // cgroup v1 (or hybrid): the hierarchy that says most. Slurm's plugin writes only its own
    // controllers, so any of them that names a job wins; then systemd's own hierarchy.
    let order = ["name=systemd", "pids", "memory", "cpu", "cpuset", "devices"];
    let mut candidates: Vec<&str> = Vec::new();
    for want in order {
        for (c, p) in &v1 {
            if c.split(',')
                .any(|c| c == want || (want == "cpu" && c == "cpu,cpuacct"))
            {
                candidates.push(p);
            }
        }
    }
    candidates.extend(v1.iter().map(|(_, p)| *p));
    // Each path once, in the order found.
    let mut seen = std::collections::HashSet::new();
    candidates.retain(|p| seen.insert(*p));
    if let Some(p) = v2 {
        // A v2 path of "/" beside v1 lines (hybrid mode) says nothing; prefer v1 then.
        if p != "/" || candidates.is_empty() {
            candidates.insert(0, p);
        }
    }
    let parsed: Vec<Workload> = candidates.iter().map(|p| from_path(p)).collect();
    parsed
        .iter()
        .find(|w| w.slurm_job.is_some() || w.pod_uid.is_some() || w.container_id.is_some())
        .or_else(|| parsed.iter().find(|w| w.unit.is_some()))
        .or(parsed.first())
        .cloned()
        .unwrap_or_default()
}

/// The workload one cgroup path names.
fn from_path(path: &str) -> Workload {
    let mut w = Workload {
        cgroup: path.to_string(),
        ..Workload::default()
    };
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        // Slurm.
        if let Some(job) = part
            .strip_prefix("job_")
            .and_then(|j| j.parse::<u64>().ok())
        {
            let under_slurm = parts[..i]
                .iter()
                .any(|p| *p == "slurm" || *p == "slurmstepd.scope" || p.starts_with("uid_"));
            if under_slurm {
                w.slurm_job = Some(job);
                w.slurm_step = parts
                    .get(i + 1)
                    .and_then(|s| s.strip_prefix("step_"))
                    .map(str::to_string);
            }
            continue;
        }
        // Kubernetes, systemd driver: kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice.
        if let Some(rest) = part
            .strip_prefix("kubepods-")
            .and_then(|r| r.strip_suffix(".slice"))
        {
            for qos in ["burstable", "besteffort"] {
                if rest == qos {
                    w.qos_class = Some(qos.into());
                }
            }
            if let Some(uid) = rest.rsplit_once("pod").map(|(_, u)| u) {
                if let Some(uid) = pod_uid(&uid.replace('_', "-")) {
                    w.pod_uid = Some(uid);
                    w.qos_class.get_or_insert_with(|| {
                        if rest.starts_with("burstable-") {
                            "burstable".into()
                        } else if rest.starts_with("besteffort-") {
                            "besteffort".into()
                        } else {
                            "guaranteed".into()
                        }
                    });
                }
            }
            continue;
        }
        // Kubernetes, cgroupfs driver: kubepods/[burstable|besteffort/]pod<uid>/<id>.
        if let Some(uid) = part.strip_prefix("pod").and_then(pod_uid) {
            if parts[..i].contains(&"kubepods") {
                w.pod_uid = Some(uid);
                w.qos_class = Some(match parts.get(i.wrapping_sub(1)) {
                    Some(&"burstable") => "burstable".into(),
                    Some(&"besteffort") => "besteffort".into(),
                    _ => "guaranteed".into(),
                });
                if let Some(id) = parts.get(i + 1).filter(|s| is_container_id(s)) {
                    w.container_id = Some(id.to_string());
                }
            }
            continue;
        }
        // Container scopes: RUNTIME-ID.scope.
        if let Some(stem) = part.strip_suffix(".scope") {
            let runtimes = [
                ("cri-containerd-", "containerd"),
                ("docker-", "docker"),
                ("crio-", "cri-o"),
                ("libpod-", "podman"),
            ];
            if let Some((id, rt)) = runtimes
                .iter()
                .find_map(|(pre, rt)| stem.strip_prefix(pre).map(|id| (id, *rt)))
                .filter(|(id, _)| is_container_id(id))
            {
                w.container_id = Some(id.to_string());
                w.runtime = Some(rt.to_string());
                continue;
            }
        }
        // cgroupfs-style container folders: docker/<id>, crio/<id>.
        if is_container_id(part) {
            w.container_id = Some(part.to_string());
            if let Some(rt) = parts.get(i.wrapping_sub(1)).and_then(|p| match *p {
                "docker" => Some("docker"),
                "crio" => Some("cri-o"),
                "libpod_parent" => Some("podman"),
                _ => None,
            }) {
                w.runtime = Some(rt.to_string());
            }
            continue;
        }
        if part.ends_with(".service") || part.ends_with(".scope") {
            w.unit = Some(part.to_string());
        }
    }
    w
}

/// A pod UID as Kubernetes writes it (8-4-4-4-12 hex digits), when `s` is one.
fn pod_uid(s: &str) -> Option<String> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    (groups.len() == 5
        && groups
            .iter()
            .zip(lens)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit())))
    .then(|| s.to_ascii_lowercase())
}

/// Whether `s` is a container ID: 64 hex digits.
fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "9c1e0f7d3b2a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5";
    const UID: &str = "3f2a6b1c-7d8e-4f90-a1b2-c3d4e5f60718";

    fn w(path: &str) -> Workload {
        from_cgroup_file(&format!("0::{path}\n"))
    }

    #[test]
    fn kubernetes_with_the_systemd_driver() {
        let u = UID.replace('-', "_");
        let b = w(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
        ));
        assert_eq!(b.pod_uid.as_deref(), Some(UID));
        assert_eq!(b.qos_class.as_deref(), Some("burstable"));
        assert_eq!(b.container_id.as_deref(), Some(ID));
        assert_eq!(b.runtime.as_deref(), Some("containerd"));
        assert_eq!(b.unit, None);
        let g = w(&format!(
            "/kubepods.slice/kubepods-pod{u}.slice/crio-{ID}.scope"
        ));
        assert_eq!(g.qos_class.as_deref(), Some("guaranteed"));
        assert_eq!(g.runtime.as_deref(), Some("cri-o"));
        let e = w(&format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/docker-{ID}.scope"
        ));
        assert_eq!(e.qos_class.as_deref(), Some("besteffort"));
        assert_eq!(e.runtime.as_deref(), Some("docker"));
        assert_eq!(e.short(), "pod 3f2a6b1c/9c1e0f7d3b2a");
    }

    #[test]
    fn kubernetes_with_the_cgroupfs_driver_on_cgroup_v1() {
        let text = format!(
            "12:pids:/kubepods/burstable/pod{UID}/{ID}\n\
             11:memory:/kubepods/burstable/pod{UID}/{ID}\n\
             1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n\
             0::/\n"
        );
        let k = from_cgroup_file(&text);
        assert_eq!(k.pod_uid.as_deref(), Some(UID));
        assert_eq!(k.qos_class.as_deref(), Some("burstable"));
        assert_eq!(k.container_id.as_deref(), Some(ID));
        let g = w(&format!("/kubepods/pod{UID}/{ID}"));
        assert_eq!(g.qos_class.as_deref(), Some("guaranteed"));
    }

    #[test]
    fn docker_and_podman() {
        let d = w(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(
            (
                d.runtime.as_deref(),
                d.container_id.as_deref(),
                d.pod_uid.as_deref()
            ),
            (Some("docker"), Some(ID), None)
        );
        assert_eq!(d.short(), "docker 9c1e0f7d3b2a");
        let d1 = from_cgroup_file(&format!(
            "4:memory:/docker/{ID}\n1:name=systemd:/docker/{ID}\n"
        ));
        assert_eq!(d1.runtime.as_deref(), Some("docker"));
        assert_eq!(d1.container_id.as_deref(), Some(ID));
        let rootless = w(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
        ));
        assert_eq!(rootless.runtime.as_deref(), Some("podman"));
        assert_eq!(rootless.container_id.as_deref(), Some(ID));
        assert_eq!(rootless.unit.as_deref(), Some("user@1000.service"));
    }

    #[test]
    fn slurm_on_both_cgroup_versions() {
        let v1 = from_cgroup_file(
            "11:memory:/slurm/uid_1000/job_4242/step_0/task_0\n\
             5:cpuset:/slurm/uid_1000/job_4242/step_0\n\
             1:name=systemd:/system.slice/slurmd.service\n",
        );
        assert_eq!(
            (v1.slurm_job, v1.slurm_step.as_deref()),
            (Some(4242), Some("0"))
        );
        assert_eq!(v1.short(), "job 4242.0");
        let v2 = w("/system.slice/slurmstepd.scope/job_4243/step_batch/user/task_0");
        assert_eq!(
            (v2.slurm_job, v2.slurm_step.as_deref()),
            (Some(4243), Some("batch"))
        );
        // "job_" elsewhere is not Slurm's.
        assert_eq!(w("/user.slice/job_7/x").slurm_job, None);
    }

    #[test]
    fn a_plain_process_names_its_unit() {
        let s = w("/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(s.unit.as_deref(), Some("session-3.scope"));
        assert_eq!(s.container_id, None);
        assert_eq!(s.short(), "session-3.scope");
        assert_eq!(w("/system.slice/ssh.service").short(), "ssh.service");
        assert_eq!(w("/").short(), "-");
        // Nonsense is no workload, not a panic.
        for t in [
            "",
            "garbage",
            "0::",
            "::::",
            "1:x",
            "0::/kubepods-pod.slice/docker-.scope",
        ] {
            let x = from_cgroup_file(t);
            assert_eq!(
                (x.container_id, x.pod_uid, x.slurm_job),
                (None, None, None),
                "{t}"
            );
        }
    }
}
