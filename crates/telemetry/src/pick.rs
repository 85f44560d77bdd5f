//! Picking GPUs for a job, as GPUtil's `getAvailable` and nvitop's `nvisel` do: the least
//! loaded devices that have enough free memory and are idle enough.
//!
//! The answer names GPUs by UUID: NVML (and nvidia-smi) number GPUs in PCI order while CUDA's
//! default order is fastest first, so a bare index in `CUDA_VISIBLE_DEVICES` can name another
//! GPU than the one measured; a UUID cannot.

use super::reading::{Reading, Vendor};
use super::Error;

/// What a picked device must offer.
#[derive(Debug, Clone, PartialEq)]
pub struct Criteria {
    /// Whose devices (NVIDIA by default: the answer is for `CUDA_VISIBLE_DEVICES`).
    pub vendor: Vendor,
    /// At least this much free device memory.
    pub min_free_bytes: Option<u64>,
    /// At most this busy, percent.
    pub max_util_percent: Option<f64>,
    /// How many devices the job needs.
    pub count: usize,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria {
            vendor: Vendor::Nvidia,
            min_free_bytes: None,
            max_util_percent: None,
            count: 1,
        }
    }
}

/// Why a device does not qualify, or `None` when it does.
fn refusal(r: &Reading, c: &Criteria) -> Option<String> {
    let id = r.id();
    if !r.up {
        return Some(format!(
            "{id} is down ({})",
            r.status.as_deref().unwrap_or("no reason given")
        ));
    }
    if let Some(o) = r.owners.first() {
        let more = match r.owners.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        return Some(format!(
            "{id} is held by pod {}{more} (the kubelet's pod-resources API)",
            o.short()
        ));
    }
    if let Some(min) = c.min_free_bytes {
        match r.memory_free_bytes() {
            None => return Some(format!("{id} does not report its free memory")),
            Some(f) if f < min => {
                return Some(format!(
                    "{id} has {} free (asked for {})",
                    accelkit_core::units::human_bytes(f),
                    accelkit_core::units::human_bytes(min)
                ))
            }
            _ => {}
        }
    }
    if let Some(max) = c.max_util_percent {
        match r.utilization_percent {
            None => return Some(format!("{id} does not report its utilisation")),
            Some(u) if u > max => {
                return Some(format!("{id} is {u:.0} % busy (at most {max:.0} % asked)"))
            }
            _ => {}
        }
    }
    None
}

/// The `count` least loaded devices of `c.vendor` that meet the criteria, least loaded first
/// (by utilisation, then by the share of memory in use, then by index); MIG instances are not
/// picked. `Err` says why when fewer than `count` qualify, device by device.
pub fn pick<'a>(devices: &'a [Reading], c: &Criteria) -> Result<Vec<&'a Reading>, Error> {
    // A GPU split into MIG instances cannot be named whole in CUDA_VISIBLE_DEVICES: left out.
    let has_mig = |r: &Reading| r.uuid.is_some() && devices.iter().any(|m| m.mig_parent == r.uuid);
    let mine: Vec<&Reading> = devices
        .iter()
        .filter(|r| r.vendor == c.vendor && r.mig_parent.is_none() && !has_mig(r))
        .collect();
    if mine.is_empty() {
        return Err(Error::NoDevice { vendor: c.vendor });
    }
    if c.count == 0 {
        return Err(Error::ZeroCount);
    }
    let mut ok: Vec<&Reading> = Vec::new();
    let mut why: Vec<String> = Vec::new();
    for r in mine {
        match refusal(r, c) {
            None => ok.push(r),
            Some(w) => why.push(w),
        }
    }
    let used_share = |r: &Reading| {
        r.memory_total_bytes
            .zip(r.memory_used_bytes)
            .filter(|(t, _)| *t > 0)
            .map_or(1.0, |(t, u)| u as f64 / t as f64)
    };
    ok.sort_by(|a, b| {
        let ua = a.utilization_percent.unwrap_or(100.0);
        let ub = b.utilization_percent.unwrap_or(100.0);
        ua.total_cmp(&ub)
            .then(used_share(a).total_cmp(&used_share(b)))
            .then(a.index.cmp(&b.index))
    });
    if ok.len() < c.count {
        return Err(Error::TooFew {
            vendor: c.vendor,
            asked: c.count,
            matched: ok.len(),
            refusals: why,
        });
    }
    ok.truncate(c.count);
    Ok(ok)
}

/// The picked devices as a `CUDA_VISIBLE_DEVICES` value: UUIDs (`GPU-...`), or NVML's indices
/// (PCI order) when `by_index`. A device without a UUID is named by its index.
pub fn visible_devices(picked: &[&Reading], by_index: bool) -> String {
    picked
        .iter()
        .map(|r| match (&r.uuid, by_index) {
            (Some(u), false) => u.clone(),
            _ => r.index.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(i: u32, util: f64, used_gib: u64, total_gib: u64) -> Reading {
        let mut r = Reading::new(Vendor::Nvidia, i, "NVIDIA H200");
        r.uuid = Some(format!("GPU-{i}"));
        r.utilization_percent = Some(util);
        r.memory_used_bytes = Some(used_gib << 30);
        r.memory_total_bytes = Some(total_gib << 30);
        r
    }

    #[test]
    fn least_loaded_first_and_reasons_when_short() {
        let mut down = gpu(3, 0.0, 0, 80);
        down.up = false;
        down.status = Some("no longer found".into());
        let devs = vec![
            gpu(0, 90.0, 70, 80),
            gpu(1, 10.0, 40, 80),
            gpu(2, 10.0, 10, 80),
            down,
        ];
        let c = Criteria {
            min_free_bytes: Some(20 << 30),
            max_util_percent: Some(50.0),
            count: 2,
            ..Criteria::default()
        };
        let p = pick(&devs, &c).unwrap();
        // Equal load: the one with less memory in use first.
        assert_eq!(visible_devices(&p, false), "GPU-2,GPU-1");
        assert_eq!(visible_devices(&p, true), "2,1");
        let e = pick(
            &devs,
            &Criteria {
                count: 3,
                ..c.clone()
            },
        )
        .unwrap_err();
        let Error::TooFew {
            asked: 3,
            matched: 2,
            ref refusals,
            ..
        } = e
        else {
            panic!("{e:?}")
        };
        assert_eq!(refusals.len(), 2, "{e}");
        let e = e.to_string();
        assert!(e.contains("asked for 3 nvidia GPU(s), 2 match"), "{e}");
        assert!(
            e.contains("nvidia:0 has 10.00 GiB free (asked for 20.00 GiB)"),
            "{e}"
        );
        assert!(e.contains("nvidia:3 is down (no longer found)"), "{e}");
        let e = pick(
            &devs,
            &Criteria {
                vendor: Vendor::Amd,
                ..c
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            Error::NoDevice {
                vendor: Vendor::Amd
            }
        );
        assert_eq!(e.to_string(), "no amd GPU on this machine");
        assert!(e.hint().is_some());
    }

    #[test]
    fn a_gpu_the_kubelet_gave_a_pod_is_not_free() {
        use crate::kubelet::{attribute, Allocation, Owner};
        let mut devs = vec![gpu(0, 0.0, 0, 80), gpu(1, 30.0, 40, 80)];
        let owner = Owner {
            namespace: "ml".into(),
            pod: "idle-reservation".into(),
            container: "main".into(),
            resource: "nvidia.com/gpu".into(),
        };
        // The pod runs nothing on GPU-0: it is idle and empty, and still not free.
        attribute(
            &mut devs,
            &[Allocation {
                owner,
                device_ids: vec!["GPU-0::1".into()],
            }],
        );
        let p = pick(&devs, &Criteria::default()).unwrap();
        assert_eq!(visible_devices(&p, false), "GPU-1");
        let e = pick(
            &devs,
            &Criteria {
                count: 2,
                ..Criteria::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("nvidia:0 is held by pod ml/idle-reservation (main) (the kubelet's pod-resources API)"),
            "{e}"
        );
    }
}
