//! What `--compare` matches runs on: the same work (device, dtype, size, and the op or the
//! copy direction; a matmul's M, N, K, B's layout and batch), and that work in words.

use accelkit::bench::{CopyRun, ElementwiseRun, MatmulRun};

/// What `--compare` matches runs on.
pub trait Comparable {
    /// Whether `other` timed the same work: device, dtype and size, and the op of an
    /// elementwise run, the direction and host memory of a copy.
    fn same_work(&self, other: &Self) -> bool;
    /// That work in words: "cpu f32 size 2000"; elementwise runs lead with their op ("add"),
    /// copies with their direction and host memory ("h2d pageable").
    fn work(&self) -> String;
    /// That work as `peer.py` takes it (`--compare torch`): its kind, device and shape.
    fn peer_job(&self) -> serde_json::Value;
}

impl Comparable for MatmulRun {
    fn same_work(&self, o: &Self) -> bool {
        let work = |r: &Self| (r.device, r.dtype, r.mnk(), r.b_transposed, r.batch);
        work(self) == work(o)
    }
    fn work(&self) -> String {
        let mut w = match self.shape {
            None => format!("{} {} size {}", self.device, self.dtype, self.size),
            Some([m, n, k]) => format!("{} {} {m}x{n}x{k}", self.device, self.dtype),
        };
        if self.b_transposed {
            w += " B transposed";
        }
        if self.batch > 1 {
            w += &format!(" batch {}", self.batch);
        }
        w
    }
    fn peer_job(&self) -> serde_json::Value {
        let [m, n, k] = self.mnk();
        serde_json::json!({
            "kind": "matmul",
            "device": self.device.to_string(),
            "dtype": self.dtype.to_string(),
            "size": self.size,
            "m": m,
            "n": n,
            "k": k,
            "b_transposed": self.b_transposed,
            "batch": self.batch,
            "tf32": accelkit::cuda::allow_tf32(),
        })
    }
}

impl Comparable for ElementwiseRun {
    fn same_work(&self, o: &Self) -> bool {
        (self.device, self.dtype, self.size, self.op) == (o.device, o.dtype, o.size, o.op)
    }
    fn work(&self) -> String {
        format!(
            "{} {} {} size {}",
            word(self.op),
            self.device,
            self.dtype,
            self.size
        )
    }
    fn peer_job(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "elementwise",
            "op": word(self.op),
            "device": self.device.to_string(),
            "dtype": self.dtype.to_string(),
            "size": self.size,
        })
    }
}

impl Comparable for CopyRun {
    fn same_work(&self, o: &Self) -> bool {
        (
            self.device,
            self.dtype,
            self.size,
            self.kind,
            self.host_memory,
        ) == (o.device, o.dtype, o.size, o.kind, o.host_memory)
    }
    fn work(&self) -> String {
        format!(
            "{} {} {} {} size {}",
            word(self.kind),
            word(self.host_memory),
            self.device,
            self.dtype,
            self.size
        )
    }
    fn peer_job(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "copy",
            "direction": word(self.kind),
            "host": word(self.host_memory),
            "device": self.device.to_string(),
            "size": self.size,
        })
    }
}

/// An enum's name as the report writes it: "add", "h2d", "pinned".
fn word(v: impl std::fmt::Debug) -> String {
    format!("{v:?}").to_lowercase()
}
