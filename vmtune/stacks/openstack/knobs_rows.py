"""nova's rows of the stack-knob table (vmtune.stacks.knob_table): for each rule, the flavor extra
spec, image property or nova.conf option that cures its finding, as nova 34.0.0 reads it.

Values are written as the strings nova stores (extra specs and image properties are strings;
nova.conf options are text). Each row is verified by rendering with the knob set
(tests/test_openstack_render.py::test_knob_cures_its_finding): the finding disappears, or the
row's value is None (advice only: the cure depends on the guest or the host).

Corrections against nova's source (kept from manager_advice.py): no emulator-thread isolation advice
for shared-CPU flavors (nova refuses hw:emulator_threads_policy=isolate without
hw:cpu_policy=dedicated or mixed: the placer says so); USB001/USB002 name hw_input_bus=virtio or
[DEFAULT] pointer_model=ps2mouse, since nova ignores hw_usb_model while it adds its USB tablet;
CLK002 has no knob: nova never writes Hyper-V stimer.
"""

from __future__ import annotations

from vmtune.stacks.knob_table import Knob

# The advice sentences, as vmtune.manager_advice says them on XML nova wrote.
TEXT: dict[str, str] = {
    'CPU001': 'nova.conf [libvirt] cpu_mode=host-passthrough (or host-model, or custom with cpu_models)',
    'CPU004': 'flavor extra spec hw:emulator_threads_policy=isolate (or share with [compute] cpu_shared_set)',
    'CPU005': ('flavor extra spec hw:emulator_threads_policy=isolate (nova pins the I/O thread with the emulator '
               'threads)'),
    'CPU007': 'flavor extra spec hw:cpu_policy=dedicated',
    'CPU008': 'flavor extra spec hw:numa_nodes=1',
    'CPU011': 'flavor extra spec hw:numa_nodes=1 (nova binds memory to the node)',
    'CPU012': 'flavor extra spec hw:numa_nodes=N (a guest NUMA topology)',
    'MEM001': 'flavor extra spec hw:mem_page_size=large',
    'MEM002': "nova.conf [libvirt] mem_stats_period_seconds=0 (nova then writes memballoon model='none')",
    'MEM007': "nova.conf [libvirt] mem_stats_period_seconds=0 (nova then writes memballoon model='none')",
    'NET001': ('image property hw_vif_multiqueue_enabled=true or flavor extra spec '
               'hw:vif_multiqueue_enabled=true'),
    'NET002': 'image property hw_vif_multiqueue_enabled (nova sizes queues to vCPUs, capped at the tap limit)',
    'NET004': 'image property hw_vif_model=virtio',
    'DSK002': "nova.conf [libvirt] disk_cachemodes (e.g. block=none; nova then writes io='native' on volumes)",
    'DSK004': 'image property hw_disk_bus=virtio',
    'DSK005': 'nova.conf [libvirt] hw_disk_discard=unmap',
    'DSK006': 'image property hw_machine_type or nova.conf [libvirt] hw_machine_type',
    'CLK001': 'image property os_type=windows (nova then adds the hypervclock timer)',
    'CLK003': "image property hw_time_hpet=false (nova's default)",
    'HV001': 'image property os_type=windows (nova then enables its Hyper-V set)',
    'USB001': ('image property hw_input_bus=virtio (a virtio tablet and keyboard: nova then writes USB '
               "model='none'), or nova.conf [DEFAULT] pointer_model=ps2mouse; hw_usb_model is ignored while nova "
               'adds its USB tablet (driver.py _guest_add_usb_root_controller writes no model then, which '
               'libvirt 9.0 makes a piix3-uhci)'),
    'USB002': ('image property hw_input_bus=virtio, or nova.conf [DEFAULT] pointer_model=ps2mouse '
               '(hw_pointer_model accepts only usbtablet)'),
    'CPU035': ('nova.conf [libvirt] cpu_models (cpu_mode=custom): the first model every compute host the guest '
               'may migrate to runs (Haswell-noTSX or newer leaves AVX2 and AES-NI to the guest), or '
               'cpu_mode=host-model where the hosts are of one generation; advice only: the choice is the cloud\'s '
               'migration baseline'),
    'CPU016': ("flavor extra spec hw:cpu_sockets=1 (or hw:cpu_max_sockets=2); nova's default is one socket per "
               'vCPU'),
    'CPU019': "flavor extra spec hw:numa_nodes=1 (nova binds memory to the vCPUs' node)",
    'CPU020': 'flavor extra spec hw:cpu_realtime_mask or hw:emulator_threads_policy=isolate',
    'CPU021': 'flavor extra spec hw:pmu=false (image property hw_pmu=false)',
    'DSK007': 'image property hw_scsi_model=virtio-scsi',
    'DSK008': "nova.conf [libvirt] disk_cachemodes=file=none (nova's default where O_DIRECT works)",
    'NET007': 'nova.conf [libvirt] rx_queue_size=1024 (tx_queue_size=1024 for vhost-user)',
    'CPU002': 'no knob: nova pins every vCPU of a hw:cpu_policy=dedicated flavor or none',
    'CPU006': 'no knob: nova never writes hint-dedicated',
    'LAT001': 'no knob: nova never writes poll-control',
    'MEM005': 'no knob: nova writes nosharepages only for realtime flavors (hw:cpu_realtime=yes)',
    'DSK003': 'no knob: nova always writes one I/O thread and never assigns disks to it',
    'CLK002': ('no knob: nova never writes Hyper-V stimer (os_type=windows gives synic without it: driver.py '
               '_set_features); image property hw_time_hpet=true only gives Windows the HPET to fall back on, '
               'which this finding still reports; the cure needs a nova that writes stimer'),
    'USB003': "no knob needed: nova writes model='none' when no USB device is attached",
}

ROWS: dict[str, tuple[Knob, ...]] = {
    'CPU001': (
        Knob('nova.conf', ('libvirt', 'cpu_mode'), 'host-passthrough', TEXT['CPU001']),
    ),
    'CPU004': (
        Knob('flavor', ('hw:emulator_threads_policy',), 'isolate', TEXT['CPU004']),
        # share: a cure only with [compute] cpu_shared_set on the host, so advice, never a fix
        Knob('flavor', ('hw:emulator_threads_policy',), None, TEXT['CPU004']),
        Knob('nova.conf', ('compute', 'cpu_shared_set'), None, TEXT['CPU004']),
    ),
    'CPU005': (
        Knob('flavor', ('hw:emulator_threads_policy',), 'isolate', TEXT['CPU005']),
    ),
    'CPU007': (
        Knob('flavor', ('hw:cpu_policy',), 'dedicated', TEXT['CPU007']),
    ),
    'CPU008': (
        Knob('flavor', ('hw:numa_nodes',), '1', TEXT['CPU008']),
    ),
    'CPU011': (
        Knob('flavor', ('hw:numa_nodes',), '1', TEXT['CPU011']),
    ),
    'CPU012': (
        Knob('flavor', ('hw:numa_nodes',), None, TEXT['CPU012']),
    ),
    'MEM001': (
        Knob('flavor', ('hw:mem_page_size',), 'large', TEXT['MEM001']),
    ),
    'MEM002': (
        Knob('nova.conf', ('libvirt', 'mem_stats_period_seconds'), '0', TEXT['MEM002']),
    ),
    'MEM007': (
        Knob('nova.conf', ('libvirt', 'mem_stats_period_seconds'), '0', TEXT['MEM007']),
    ),
    'NET001': (
        Knob('image', ('hw_vif_multiqueue_enabled',), 'true', TEXT['NET001']),
        Knob('flavor', ('hw:vif_multiqueue_enabled',), 'true', TEXT['NET001']),
    ),
    'NET002': (
        Knob('image', ('hw_vif_multiqueue_enabled',), None, TEXT['NET002']),
        Knob('nova.conf', ('libvirt', 'max_queues'), None, TEXT['NET002']),
    ),
    'NET004': (
        Knob('image', ('hw_vif_model',), 'virtio', TEXT['NET004']),
    ),
    'DSK002': (
        Knob('nova.conf', ('libvirt', 'disk_cachemodes'), None, TEXT['DSK002']),
    ),
    'DSK004': (
        Knob('image', ('hw_disk_bus',), 'virtio', TEXT['DSK004']),
    ),
    'DSK005': (
        Knob('nova.conf', ('libvirt', 'hw_disk_discard'), 'unmap', TEXT['DSK005']),
    ),
    'DSK006': (
        Knob('image', ('hw_machine_type',), 'q35', TEXT['DSK006']),
        Knob('nova.conf', ('libvirt', 'hw_machine_type'), 'x86_64=q35', TEXT['DSK006']),
    ),
    'CLK001': (
        Knob('image', ('os_type',), 'windows', TEXT['CLK001']),
    ),
    'CLK003': (
        Knob('image', ('hw_time_hpet',), 'false', TEXT['CLK003']),
    ),
    'HV001': (
        Knob('image', ('os_type',), 'windows', TEXT['HV001']),
    ),
    'USB001': (
        Knob('image', ('hw_input_bus',), 'virtio', TEXT['USB001']),
        Knob('nova.conf', ('DEFAULT', 'pointer_model'), 'ps2mouse', TEXT['USB001']),
    ),
    'USB002': (
        Knob('image', ('hw_input_bus',), 'virtio', TEXT['USB002']),
        Knob('nova.conf', ('DEFAULT', 'pointer_model'), 'ps2mouse', TEXT['USB002']),
    ),
    'CPU016': (
        Knob('flavor', ('hw:cpu_sockets',), '1', TEXT['CPU016']),
        Knob('flavor', ('hw:cpu_max_sockets',), '2', TEXT['CPU016']),
    ),
    'CPU035': (
        Knob('nova.conf', ('libvirt', 'cpu_models'), None, TEXT['CPU035']),
    ),
    'CPU019': (
        Knob('flavor', ('hw:numa_nodes',), '1', TEXT['CPU019']),
    ),
    'CPU020': (
        Knob('flavor', ('hw:cpu_realtime_mask',), None, TEXT['CPU020']),
        Knob('flavor', ('hw:emulator_threads_policy',), 'isolate', TEXT['CPU020']),
    ),
    'CPU021': (
        Knob('flavor', ('hw:pmu',), 'false', TEXT['CPU021']),
        Knob('image', ('hw_pmu',), 'false', TEXT['CPU021']),
    ),
    'DSK007': (
        Knob('image', ('hw_scsi_model',), 'virtio-scsi', TEXT['DSK007']),
    ),
    'DSK008': (
        Knob('nova.conf', ('libvirt', 'disk_cachemodes'), 'file=none', TEXT['DSK008']),
    ),
    'NET007': (
        Knob('nova.conf', ('libvirt', 'rx_queue_size'), '1024', TEXT['NET007']),
    ),
}

NO_KNOB: dict[str, str] = {code: TEXT[code] for code in (
    'CPU002', 'CPU006', 'LAT001', 'MEM005', 'DSK003', 'CLK002', 'USB003')}

# Where a finding without a knob is said when not on the flavor: (object, key whose line it goes
# to). CLK002 is about the guest the image boots (os_type=windows), not about the flavor.
SAID_ON: dict[str, tuple[str, str]] = {'CLK002': ('image', 'os_type')}
