"""Rules about what a stack's source leaves open when vmtune renders the domain it would write
(KubeVirt manifests, OpenStack flavors and images): their findings are made by the front end
(vmtune.stacks), never by check() on a domain."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.rules.base import Context, Finding, Rule, Severity


class UnresolvedReference(Rule):
    """
    ## What it checks
    A reference the stack resolves when the VM is created that is not among the files given:
    a KubeVirt instancetype or preference, an OpenStack flavor named by `--pair`.

    Before saying so, vmtune looks for a KubeVirt instancetype or preference in the other
    `*.yaml`/`*.yml`/`*.json` files of the VM file's git work tree (pre-commit passes only the
    files a commit changed): bounded (20,000 directory entries, 1 MiB a file, 32 MiB, 3 s), no
    symlink followed, no hidden directory, nested work tree or git-ignored file read; the note
    says where it looked and whether a bound stopped it. A name of kubevirt/common-instancetypes
    (deployed cluster-wide by virt-operator) is not this finding: it is taken as vmtune's table of
    the upstream bundle defines it, said as STK002.

    ## Why it matters
    The referenced object sets CPUs, memory, devices and Hyper-V features. Without it vmtune
    renders the VM from what the manifest says alone: findings may be missing or extra. A
    preference's name still tells the OS family (`windows.2k22` is Windows), and vmtune says so.
    KubeVirt does not start a VM whose instancetype or preference it cannot find, but vmtune
    cannot see the cluster, so this is never an error. On such a VM no fix is written (a
    VM-level field would shadow what the unseen object sets: KubeVirt fills only what the VM
    leaves unset), and a finding on a value the VM does not write itself is reported as info:
    it depends on what vmtune did not see.

    ## Example
    ```yaml
    spec:
      preference: {kind: VirtualMachineClusterPreference, name: windows.2k22}
    ```

    ## Fix
    None: give the file or directory that holds it (`--instancetypes DIR`, e.g. a checkout of
    kubevirt/common-instancetypes), or accept.

    ## Calibration
    Info: nothing about the guest is known to be wrong; what was checked is narrower than the
    VM the stack will create.
    Versions: no libvirt version; KubeVirt instancetype.kubevirt.io v1beta1 and v1alpha2.

    ## References
    - KubeVirt user guide, Instance types and preferences
    """

    code = "STK001"

    since = "0.2.0"
    name = "unresolved-reference"
    severity = Severity.INFO
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


class AssumedInput(Rule):
    """
    ## What it checks
    A value vmtune had to assume to render the domain: an OpenShift Template's `${PARAM}`
    taken from the parameter's default, an image checked with the smallest flavor it fits; in
    Terraform, a value known only when Terraform applies (another resource's attribute, a data
    source, a variable without a default: left out, never judged as zero), a `count`/`for_each`
    resource checked as one instance, a `libvirt_domain` of the provider's 0.7/0.8 schema; a
    KubeVirt instancetype or preference that no file defines, taken as kubevirt/common-instancetypes
    defines it (virt-operator deploys it cluster-wide; the table's bundle version is named).

    ## Why it matters
    The domain the stack writes depends on it; a different value at creation time can add or
    remove findings. The report says which value was used, so a reviewer can judge.

    ## Example
    ```yaml
    parameters:
    - name: CPU_CORES
      value: "4"
    ```

    ## Fix
    None: name the value (`--pair FLAVOR:IMAGE`), or accept.

    ## Calibration
    Info: a statement of what was checked, not a problem of the guest.
    Versions: none; a statement about the input.

    ## References
    - OpenShift documentation, Templates: parameters
    """

    code = "STK002"

    since = "0.2.0"
    name = "assumed-input"
    severity = Severity.INFO
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


class UnknownStackKey(Rule):
    """
    ## What it checks
    A key the stack does not know in a place it reads: a flavor extra spec in a namespace nova's
    validator does not register, an image property nova's ImageMetaProps does not define, a key
    under a KubeVirt VMI spec's `domain` that KubeVirt's API does not define there, a key inside
    a Terraform `libvirt_domain`'s nested attribute that the provider's schema does not have.

    ## Why it matters
    nova ignores it (its extra-spec validation reports unknown namespaces at most): a misspelt
    `hw:cpu_polcy` leaves the guest unpinned while the flavor looks pinned to a reviewer.
    KubeVirt never sees it: the API server refuses it (kubectl's strict field validation) or
    drops it, so `domain.cpu.ioThreadsPolicy` (KubeVirt's own user guide wrote it there) sets
    nothing; the note says where the field is. Terraform discards unknown keys of a nested
    attribute's object without a diagnostic (hashicorp/terraform#33570): `hyper_v = { vpindex =
    { state = "on" } }` plans and applies, and the guest has no vpindex (the provider spells it
    `vp_index`, snake_case of libvirtxml's Go field); the note names the right spelling.

    ## Example
    ```yaml
    extra_specs:
      hw:cpu_polcy: dedicated
    ```

    ## Fix
    None: correct the key.

    ## Calibration
    Info: nova accepts the flavor; other services may read the namespace (aggregate filters).
    KubeVirt: the fields of KubeVirt d923fdb's API (its swagger.json); a newer KubeVirt may add some.
    Terraform: the attributes of terraform-provider-libvirt 6bd1e073's generated schema.
    Versions: no libvirt version; nova 34.0.0 validators (nova/api/validation/extra_specs).

    ## References
    - nova-specs, flavor-extra-spec-validators
    - hashicorp/terraform#33570, unknown attributes of a nested object are dropped silently
    """

    code = "STK003"

    since = "0.2.0"
    name = "unknown-stack-key"
    severity = Severity.INFO
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


class StackRefuses(Rule):
    """
    ## What it checks
    An object the stack itself refuses, so no VM is ever made of it: a flavor extra spec value
    nova's extra spec validator rejects (`hw:emulator_threads_policy=isolated`), a flavor ×
    image nova's API or scheduler refuses (real-time or emulator isolation without dedicated
    CPUs, conflicting flavor and image values, a NUMA cell, thread policy or hugepage request
    the compute node cannot meet), a nova.conf option nova-compute does not start with; a
    KubeVirt VM whose instancetype is defined nowhere vmtune can see while every other
    reference resolved, or whose `features.hypervPassthrough` stands beside a Hyper-V set (its
    own, or its preference's, which KubeVirt applies all the same).

    ## Why it matters
    `openstack flavor set` fails, or the server goes to ERROR with "No valid host was found";
    KubeVirt's admission refuses the VM. Judging the domain such an object would have rendered
    reports tuning advice for a VM that never runs, so vmtune does not: the object gets this
    finding alone, at the key that makes the stack refuse it, with the stack's own reason.

    ## Example
    ```yaml
    extra_specs:
      hw:cpu_policy: pinned
    ```

    ## Fix
    None: correct the value the finding names (nova's message lists what it accepts).

    ## Calibration
    Error: the stack refuses the object; nothing runs. Each refusal is one nova 34.0.0 makes
    (the oracle cases `fixtures/stacks/nova/oracle/*.error` were written by nova's own
    validators, API checks, placement query and NUMA fit). Requests judged against the stated
    compute node (SMT siblings, two 32 GiB cells, their page pools) say so in the message.
    Versions: no libvirt version; nova 34.0.0's validators and hardware.py. KubeVirt: the
    refusal of virt-api's VMI create admitter (`webhooks/hyperv.go`, d923fdb).

    ## References
    - nova `nova/api/validation/extra_specs/` (hw.py, base.py: the value schemas and messages)
    - nova `nova/virt/hardware.py` `numa_get_constraints`, `numa_fit_instance_to_host`
    - nova `nova/compute/api.py` `_validate_flavor_image_nostatus`
    """

    code = "STK004"

    since = "unreleased"
    name = "stack-refuses"
    severity = Severity.ERROR
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


RULES = (UnresolvedReference(), AssumedInput(), UnknownStackKey(), StackRefuses())
