"""Input problems (``SVD0xx``): reported by the readers, documented like every rule."""

from __future__ import annotations

from svcdoctor.checks.registry import input_rule
from svcdoctor.model import Severity

INVALID_YAML = input_rule(
    "SVD001",
    "invalid-yaml",
    Severity.ERROR,
    """
    The file is not valid YAML or JSON, so nothing in it was checked.

    ## What it does
    Reports the parser's message with the file and line where parsing stopped. The other
    inputs are still checked; the exit code is 2. A CustomResourceDefinition is counted, not
    parsed (no check reads it, and its schema is most of an operator's YAML): an error inside
    one is left to `kubectl apply --dry-run` or kubeconform.

    ## Why it matters
    A file svcdoctor cannot read is a file whose Services and workloads were not checked.
    Saying so, instead of skipping it, keeps a green run meaningful.

    ## Example
    Bad:
    ```yaml
    apiVersion: v1
    kind: Service
    metadata:
      name: api
     labels: {app: api}   # indentation error
    ```
    Good:
    ```yaml
    apiVersion: v1
    kind: Service
    metadata:
      name: api
      labels: {app: api}
    ```

    ## Fix
    Correct the YAML at the reported line (`kubectl apply --dry-run=client -f FILE` shows the
    same error).

    ## References
    - https://yaml.org/spec/1.2.2/
    """,
)

HELM_TEMPLATE = input_rule(
    "SVD002",
    "unrendered-template",
    Severity.ERROR,
    """
    The file is a Helm (Go) template, not a manifest.

    ## What it does
    Detects `{{ … }}` template directives outside string values and refuses to guess what they
    render to. A Helm template (Helm's built-in objects anywhere in the file, `.Values`,
    `.Release`…, or its functions, `include`, `toYaml`…, in a file that reads no other data, or a
    chart's `templates/`) is an error (render it first); a template without them, which other
    tooling fills (a Go or Mustache renderer such as envtpl or gomplate, a script: `{{{IMAGE}}}`, or
    a line that is only `${VAR}`, text envsubst puts in indented; Jinja2, an Ansible role's, whose
    single-quoted strings no Go template parses), is info: lint what that tooling renders; one in a
    Go module that reads its own data (`{{ .HandlerNamespace }}`) is the module's programs' and
    counted. A placeholder that a controller fills at run time (Argo Workflows'
    `{{inputs.parameters.x}}`, Argo Rollouts' `{{args.x}}`) is not Helm: it is reported as info,
    with the advice to quote it as those projects' docs do, so that the document is valid YAML and
    gets checked. A ytt (Carvel) template is an error too: a document that a `#@ def` function, a
    `#@ if` or a `#@ for` makes, or whose `name`/`namespace` is a `#@` expression (null as YAML), is
    not checked; the file's documents with literal names are. A Service selector value that is null
    (a template's) selects no pod. A document of a kind no check reads (a Secret whose values a
    README says to fill in, a ConfigMap, a Role whose kind is itself templated and that names no
    pod, selector or port) loses nothing and is not reported, nor is a list of name-only stubs
    (apiVersion, kind, metadata: what an Ansible role deletes); a template action in a valid value
    (`replicas: "{{ .Values.n }}"`) is read as unset. Like every finding it exits by `--fail-on`
    (never 2); `--exit-zero` gives 0.

    ## Why it matters
    Linting the template source would check neither what your chart renders nor what reaches
    the cluster. The rendered output is what matters.

    ## Example
    Bad:
    ```yaml
    metadata:
      name: {{ include "api.fullname" . }}
    ```
    Good: lint the rendered manifests.
    ```yaml
    metadata:
      name: api
    ```

    ## Fix
    Pipe the rendered chart: `helm template RELEASE CHART -f values.yaml | svcdoctor lint -`
    (or `kustomize build DIR | svcdoctor lint -`, `ytt -f DIR | svcdoctor lint -`).

    ## References
    - https://helm.sh/docs/helm/helm_template/
    - https://carvel.dev/ytt/docs/latest/lang/
    """,
)

UNREADABLE_INPUT = input_rule(
    "SVD003",
    "unreadable-input",
    Severity.ERROR,
    """
    An input could not be read: missing, binary, not text, too large, or too complex.

    ## What it does
    Refuses, with the reason, paths that do not exist, directories with no manifests, binary
    files, files over the size limit (`--max-file-mb`, default 32), YAML whose aliases would
    expand without bound ("billion laughs") and absurdly deep nesting. Reading stays bounded
    in time and memory whatever the input.

    ## Why it matters
    A linter that hangs, runs out of memory or silently skips an input cannot gate a CI
    pipeline.

    ## Example
    Bad:
    ```yaml
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    # … and so on: a few hundred bytes that expand to billions of nodes
    ```
    Good: ordinary manifests, anchors used for sharing small values.
    ```yaml
    apiVersion: v1
    kind: Service
    metadata: {name: api}
    ```

    ## Fix
    Pass the manifest files themselves; for a very large `kubectl get -o yaml` dump raise
    `--max-file-mb`, or split it.

    ## References
    - https://en.wikipedia.org/wiki/Billion_laughs_attack
    """,
)

INVALID_FIELD = input_rule(
    "SVD004",
    "invalid-field",
    Severity.ERROR,
    """
    A field the checks read has the wrong type, so the API server would reject the object.

    ## What it does
    Names the object, the field path and what was found instead (for example
    `spec.replicas must be an integer, got 'two'`). The rest of the object is still checked.
    A value a tool fills in before the object is applied is no wrong type: a template action
    (`{{ .Values.port }}`), a variable (`${PORT}`), a chainsaw binding (`($port)`), which
    chainsaw evaluates as its test applies the file; it is read as unknown.

    ## Why it matters
    A mistyped field is either a typo that `kubectl apply` will refuse, or a value that does
    not mean what its author thinks.

    ## Example
    Bad:
    ```yaml
    spec:
      replicas: "two"
    ```
    Good:
    ```yaml
    spec:
      replicas: 2
    ```

    ## Fix
    Give the field the type the Kubernetes API defines (`kubectl explain KIND.FIELD`).

    ## References
    - https://kubernetes.io/docs/reference/kubernetes-api/
    """,
)

REMOVED_API = input_rule(
    "SVD006",
    "removed-api-version",
    Severity.ERROR,
    """
    A workload is written in an API version no supported Kubernetes serves.

    ## What it does
    Flags Deployments, DaemonSets, ReplicaSets and StatefulSets of `extensions/v1beta1`,
    `apps/v1beta1` or `apps/v1beta2` (removed in Kubernetes 1.16) and CronJobs of
    `batch/v1beta1` (removed in 1.25) or `batch/v2alpha1` (1.21). `kubectl apply` refuses them
    ("no matches for kind"), so their rollout, shutdown and probe risks are not checked: the
    defaults they would get are those of the version you port them to (`extensions/v1beta1`
    rolled a Deployment with `maxUnavailable: 1`, `apps/v1` with 25 %). Their pods' labels still
    count for the Services that select them (no SVD207). Like every finding it exits by
    `--fail-on` (never 2). The old releases of a release series (files of one folder whose
    names differ by a version, `csi-v0.1.0.yaml` beside `csi-v1.2.0.yaml`) of which a file
    defines workloads of served versions are one info note: releases kept for older clusters.

    ## Why it matters
    A manifest the cluster rejects deploys nothing; a rollout analysis of it would describe
    an object that cannot exist.

    ## Example
    Bad:
    ```yaml
    apiVersion: extensions/v1beta1
    kind: Deployment
    metadata: {name: api}
    spec:
      template:
        metadata: {labels: {app: api}}
    ```
    Good:
    ```yaml
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: api}
    spec:
      selector: {matchLabels: {app: api}}   # required in apps/v1
      template:
        metadata: {labels: {app: api}}
    ```

    ## Fix
    Change `apiVersion` to `apps/v1` (`batch/v1` for a CronJob), add `spec.selector` where
    it is missing, and lint again. `kubectl convert` writes the old version's defaults out
    (`maxUnavailable: 1`, `maxSurge: 1`; a DaemonSet's `OnDelete`): check them.

    ## References
    - https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-16
    - https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-25
    - https://kubernetes.io/blog/2019/07/18/api-deprecations-in-1-16/
    """,
)

INVALID_SUPPRESSION = input_rule(
    "SVD005",
    "invalid-suppression",
    Severity.ERROR,
    """
    An `ignore.svcdoctor.io/<ID>` annotation names an unknown rule or gives no reason.

    ## What it does
    Checks every suppression annotation: the key must name a rule (id or name) and the value
    must say why the finding does not apply. An invalid suppression suppresses nothing.

    ## Why it matters
    A suppression without a reason is a finding nobody can re-evaluate later; a typo in the
    rule id silently suppresses nothing.

    ## Example
    Bad:
    ```yaml
    metadata:
      annotations:
        ignore.svcdoctor.io/SVD101: ""
    ```
    Good:
    ```yaml
    metadata:
      annotations:
        ignore.svcdoctor.io/SVD101: "the app drains itself on SIGTERM for 15 s"
    ```

    ## Fix
    Write the reason as the annotation value, and use an id from `svcdoctor rules`.

    ## References
    - https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/
    """,
)
