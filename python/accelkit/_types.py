"""Typed views of the records the module returns, for editors and type checkers only:
the records are `accel.Record` objects with these fields as attributes. Generated from
schemas/ by scripts/record_types.py; do not edit."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Protocol


class Check(Protocol):
    id: str
    title: str
    status: str
    found: str
    fix: str
    # For every fail and warn: the stable id of its cause (the check's own id where no deeper ca
    cause: Optional[str]
    # Set when this check fails only because of the section's root cause (its id).
    consequence_of: Optional[str]
    def to_dict(self) -> Dict[str, Any]: ...


class Section(Protocol):
    backend: str
    probe_seconds: float
    # Whether the backend can be used (through accel, PyTorch or JAX) as things stand.
    usable: bool
    # The root cause's stable id (docs/doctor.md lists them); null when usable or not applicable
    cause: Optional[str]
    checks: List[Check]
    def to_dict(self) -> Dict[str, Any]: ...


class Diagnosis(Protocol):
    sections: List[Section]
    best_device: str
    best_device_works: bool
    seconds: float
    def to_dict(self) -> Dict[str, Any]: ...
    def __iter__(self) -> Iterator[Section]: ...
    def __len__(self) -> int: ...


class HostMemory(Protocol):
    total_bytes: int
    used_bytes: int
    available_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int
    def to_dict(self) -> Dict[str, Any]: ...


class Host(Protocol):
    cpu_percent: float
    cpu_per_core_percent: List[float]
    memory: HostMemory
    load_average: Optional[List[float]]
    process_rss_bytes: Optional[int]
    cpu_interval_s: float
    # Energy of every CPU package since the reader started (RAPL)
    cpu_energy_joules: Optional[float]
    # DRAM energy since the reader started (RAPL), where there is a DRAM zone
    dram_energy_joules: Optional[float]
    # Why the energies are not known, when they are not
    energy_note: Optional[str]
    def to_dict(self) -> Dict[str, Any]: ...


class Workload(Protocol):
    container_id: Optional[str]
    runtime: Optional[str]
    pod_uid: Optional[str]
    qos_class: Optional[str]
    slurm_job: Optional[int]
    slurm_step: Optional[str]
    unit: Optional[str]
    # The pod's namespace, from the kubelet, when exactly one container holds the process's devi
    namespace: Optional[str]
    # The pod's name, from the kubelet, as namespace
    pod: Optional[str]
    # The container's name, from the kubelet, as namespace
    container: Optional[str]
    cgroup: str
    def to_dict(self) -> Dict[str, Any]: ...


class Process(Protocol):
    pid: int
    user: Optional[str]
    command: Optional[str]
    memory_bytes: Optional[int]
    busy_percent: Optional[float]
    # The container, Kubernetes pod, Slurm job or systemd unit the process runs in, from /proc/P
    workload: Optional[Workload]
    # Why the rest is unknown: a process NVML names by a PID that is not in this PID namespace
    note: Optional[str]
    def to_dict(self) -> Dict[str, Any]: ...


class Owner(Protocol):
    namespace: str
    pod: str
    container: str
    resource: str
    def to_dict(self) -> Dict[str, Any]: ...


class InvalidValue(Protocol):
    field: str
    raw: str
    why: str
    def to_dict(self) -> Dict[str, Any]: ...


class DeviceLoad(Protocol):
    vendor: str
    index: int
    name: str
    driver: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]
    up: bool
    status: Optional[str]
    utilization_percent: Optional[float]
    memory_busy_percent: Optional[float]
    memory_used_bytes: Optional[int]
    memory_total_bytes: Optional[int]
    gtt_used_bytes: Optional[int]
    gtt_total_bytes: Optional[int]
    temperature_c: Optional[float]
    power_w: Optional[float]
    power_limit_w: Optional[float]
    energy_joules: Optional[float]
    fan_rpm: Optional[int]
    clock_core_mhz: Optional[int]
    clock_memory_mhz: Optional[int]
    throttle_reasons: List[str]
    pcie_tx_bytes_per_s: Optional[int]
    pcie_rx_bytes_per_s: Optional[int]
    ecc_corrected_errors: Optional[int]
    ecc_uncorrected_errors: Optional[int]
    # PCIe replays since the driver loaded (NVML)
    pcie_replay_errors: Optional[int]
    # Rows remapped (Ampere and later) or pages retired for memory errors
    retired_memory: Optional[int]
    # A remapped row or retired page waits for a GPU reset
    memory_repair_pending: Optional[bool]
    # Row remapping failed: no spare rows left
    memory_repair_failed: Optional[bool]
    # NVIDIA XID errors since the monitor started, by XID (absent when none)
    xid_errors: Dict[str, Any]
    # The last XID error since the monitor started
    last_xid: Optional[int]
    mig_parent: Optional[str]
    processes: List[Process]
    # The containers the kubelet gave this device (its pod-resources API), with or without a pro
    owners: List[Owner]
    accel_device: Optional[str]
    accel_allocated_bytes: int
    accel_reserved_bytes: int
    accel_peak_bytes: int
    mig_index: Optional[int]
    # Values the reader gave that no device can have, taken out of the fields (absent when none)
    invalid: List[InvalidValue]
    def to_dict(self) -> Dict[str, Any]: ...


class MemoryStats(Protocol):
    device: str
    allocated_bytes: int
    peak_allocated_bytes: int
    reserved_bytes: int
    free_bytes: Optional[int]
    total_bytes: Optional[int]
    def to_dict(self) -> Dict[str, Any]: ...


class Collector(Protocol):
    collector: str
    success: bool
    error: Optional[str]
    duration_s: float
    devices: int
    note: Optional[str]
    def to_dict(self) -> Dict[str, Any]: ...


class Snapshot(Protocol):
    time_unix_s: float
    hostname: str
    host: Host
    devices: List[DeviceLoad]
    accel_memory: List[MemoryStats]
    collectors: List[Collector]
    def to_dict(self) -> Dict[str, Any]: ...
    def __iter__(self) -> Iterator[DeviceLoad]: ...
    def __len__(self) -> int: ...


class Reading(Protocol):
    vendor: str
    index: int
    name: str
    driver: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]
    up: bool
    status: Optional[str]
    utilization_percent: Optional[float]
    memory_busy_percent: Optional[float]
    memory_used_bytes: Optional[int]
    memory_total_bytes: Optional[int]
    gtt_used_bytes: Optional[int]
    gtt_total_bytes: Optional[int]
    temperature_c: Optional[float]
    power_w: Optional[float]
    power_limit_w: Optional[float]
    energy_joules: Optional[float]
    fan_rpm: Optional[int]
    clock_core_mhz: Optional[int]
    clock_memory_mhz: Optional[int]
    throttle_reasons: List[str]
    pcie_tx_bytes_per_s: Optional[int]
    pcie_rx_bytes_per_s: Optional[int]
    ecc_corrected_errors: Optional[int]
    ecc_uncorrected_errors: Optional[int]
    # PCIe replays since the driver loaded (NVML)
    pcie_replay_errors: Optional[int]
    # Rows remapped (Ampere and later) or pages retired for memory errors
    retired_memory: Optional[int]
    # A remapped row or retired page waits for a GPU reset
    memory_repair_pending: Optional[bool]
    # Row remapping failed: no spare rows left
    memory_repair_failed: Optional[bool]
    # NVIDIA XID errors since the monitor started, by XID (absent when none)
    xid_errors: Dict[str, Any]
    # The last XID error since the monitor started
    last_xid: Optional[int]
    mig_parent: Optional[str]
    processes: List[Process]
    # The containers the kubelet gave this device (its pod-resources API), with or without a pro
    owners: List[Owner]
    mig_index: Optional[int]
    # Values the reader gave that no device can have, taken out of the fields (absent when none)
    invalid: List[InvalidValue]
    def to_dict(self) -> Dict[str, Any]: ...


class Picked(Protocol):
    cuda_visible_devices: str
    devices: List[Reading]
    def to_dict(self) -> Dict[str, Any]: ...
