package main

// controllers selects the manager's four controllers in controller-runtime's series.
const controllers = `controller=~"chaosagent|copyratorrule|exchangerate|registrymirror"`

// manager selects the manager's pods by the job the scrape gave them.
const manager = `job=~"$job"`

// jobVar names the manager's scrape job: whatever job scrapes the four controllers.
var jobVar = variable{name: "job", label: "Manager job", selector: "controller_runtime_reconcile_total{" + controllers + "}"}

// dashboards are what make dashboards writes to config/grafana, in file order.
var dashboards = []spec{overview, chaosAgents, copyratorRules, exchangeRates, registryMirrors}

var overview = spec{
	file: "quartet-overview", uid: "quartet-overview", title: "Quartet / Overview",
	description: "Is each of the four controllers keeping up: reconciles, errors, latency, work queues; and the manager's memory, CPU and restarts.",
	vars:        []variable{jobVar},
	rows: []row{{title: "Controllers", panels: []panel{
		{title: "Errors in the last 30 minutes", stat: true, unit: "short",
			description: "Reconciles that returned an error, per controller, over the window alert QuartetReconcileErrors looks at. 0 is healthy.",
			queries:     []query{{`sum by (controller) (increase(controller_runtime_reconcile_errors_total{` + manager + `, ` + controllers + `}[30m]))`, "{{controller}}"}}},
		{title: "Workers busy", stat: true, unit: "short",
			description: "Reconciles running now against the controller's worker limit: a controller at its limit for long is falling behind.",
			queries: []query{{`sum by (controller) (controller_runtime_active_workers{` + manager + `, ` + controllers + `})`, "{{controller}} busy"},
				{`sum by (controller) (controller_runtime_max_concurrent_reconciles{` + manager + `, ` + controllers + `})`, "{{controller}} limit"}}},
		{title: "Reconciles per second", unit: "ops",
			description: "Reconciles by controller and result (success, error, requeue, requeue_after).",
			queries:     []query{{`sum by (controller, result) (rate(controller_runtime_reconcile_total{` + manager + `, ` + controllers + `}[` + rateInterval + `]))`, "{{controller}} {{result}}"}}},
		{title: "Reconcile errors per second", unit: "ops",
			description: "Reconciles that returned an error; the objects' Events and conditions say which and why.",
			queries:     []query{{`sum by (controller) (rate(controller_runtime_reconcile_errors_total{` + manager + `, ` + controllers + `}[` + rateInterval + `]))`, "{{controller}}"}}},
		{title: "Reconcile time, 50th and 99th percentile", unit: "s",
			description: "How long one reconcile takes, by controller.",
			queries: []query{{`histogram_quantile(0.5, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{` + manager + `, ` + controllers + `}[` + rateInterval + `])))`, "{{controller}} p50"},
				{`histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{` + manager + `, ` + controllers + `}[` + rateInterval + `])))`, "{{controller}} p99"}}},
		{title: "Work queue depth", unit: "short",
			description: "Objects waiting for a worker, by controller. A queue that stays deep means changes reach objects late.",
			queries:     []query{{`sum by (controller) (workqueue_depth{` + manager + `, ` + controllers + `})`, "{{controller}}"}}},
		{title: "Time in the work queue, 99th percentile", unit: "s",
			description: "How long an object waits in the queue before a worker takes it, by controller.",
			queries:     []query{{`histogram_quantile(0.99, sum by (controller, le) (rate(workqueue_queue_duration_seconds_bucket{` + manager + `, ` + controllers + `}[` + rateInterval + `])))`, "{{controller}}"}}},
		{title: "Retries per second", unit: "ops",
			description: "Objects put back in the queue with backoff (after an error or a requeue), by controller.",
			queries:     []query{{`sum by (controller) (rate(workqueue_retries_total{` + manager + `, ` + controllers + `}[` + rateInterval + `]))`, "{{controller}}"}}},
	}}, {title: "Manager", panels: []panel{
		{title: "Manager pods up", stat: true, unit: "short",
			description: "Manager pods Prometheus scrapes successfully.",
			queries:     []query{{`sum(up{` + manager + `})`, "up"}}},
		{title: "Restarts in the last hour", stat: true, unit: "short",
			description: "Times a manager process started again within the hour, per pod.",
			queries:     []query{{`changes(process_start_time_seconds{` + manager + `}[1h])`, "{{pod}}{{instance}}"}}},
		{title: "Memory", unit: "bytes",
			description: "Resident memory and Go heap in use of each manager pod; the chart's default limit is 512 MiB.",
			queries: []query{{`process_resident_memory_bytes{` + manager + `}`, "{{pod}}{{instance}} resident"},
				{`go_memstats_heap_inuse_bytes{` + manager + `}`, "{{pod}}{{instance}} heap"}}},
		{title: "CPU", unit: "short",
			description: "CPU seconds per second of each manager pod.",
			queries:     []query{{`rate(process_cpu_seconds_total{` + manager + `}[` + rateInterval + `])`, "{{pod}}{{instance}}"}}},
	}}},
}

const agent = `agent=~"$agent"`

var chaosAgents = spec{
	file: "quartet-chaosagent", uid: "quartet-chaosagent", title: "Quartet / ChaosAgent",
	description: "What the chaos agents did and did not do: actions by kind, agent and result, rounds skipped and why, runs that ended, changes not yet put back.",
	vars:        []variable{{name: "agent", label: "Agent", selector: "quartet_chaosagent_rounds_total"}},
	rows: []row{{title: "Actions", panels: []panel{
		{title: "Actions in the last hour", stat: true, unit: "short",
			description: "Actions done (or, in dry run, that would have been done) in the last hour, by kind.",
			queries:     []query{{`sum by (action) (increase(quartet_chaosagent_actions_total{` + agent + `, result=~"succeeded|dry_run"}[1h]))`, "{{action}}"}}},
		{title: "Changes not yet put back", stat: true, unit: "short",
			description: "Deployments and ConfigMaps an agent changed and has not restored yet (restoreOnDelete, a guard trip or the end of a run restore them).",
			queries:     []query{{`sum by (agent) (quartet_chaosagent_changed_objects{` + agent + `})`, "{{agent}}"}}},
		{title: "Actions by kind and agent", unit: "short",
			description: "KillPod (an eviction), ScaleDeployment, IpsumConfigMap and the restores, done or dry run, per interval.",
			queries:     []query{{`sum by (agent, action) (increase(quartet_chaosagent_actions_total{` + agent + `, result=~"succeeded|dry_run"}[` + rateInterval + `]))`, "{{agent}} {{action}}"}}},
		{title: "Actions skipped or failed", unit: "short",
			description: "Actions not done: skipped (a PodDisruptionBudget, an immutable ConfigMap, the object gone) or failed (refused by the API server); alert QuartetChaosAgentActionsFailing.",
			queries:     []query{{`sum by (agent, action, result) (increase(quartet_chaosagent_actions_total{` + agent + `, result=~"skipped|failed"}[` + rateInterval + `]))`, "{{agent}} {{action}} {{result}}"}}},
	}}, {title: "Rounds", panels: []panel{
		{title: "Rounds run", unit: "short",
			description: "Rounds each agent ran, per interval.",
			queries:     []query{{`sum by (agent) (increase(quartet_chaosagent_rounds_total{` + agent + `}[` + rateInterval + `]))`, "{{agent}}"}}},
		{title: "Rounds skipped, and why", unit: "short",
			description: "Rounds that came due and did nothing, by reason (docs/METRICS.md lists them: outside the schedule's window, a guard tripped, nothing to act on).",
			queries:     []query{{`sum by (agent, reason) (increase(quartet_chaosagent_rounds_skipped_total{` + agent + `}[` + rateInterval + `]))`, "{{agent}} {{reason}}"}}},
		{title: "Runs ended", unit: "short",
			description: "Runs an agent ended on its own: GuardTripped (what it changed was put back) or DurationElapsed.",
			queries:     []query{{`sum by (agent, reason) (increase(quartet_chaosagent_runs_ended_total{` + agent + `}[` + rateInterval + `]))`, "{{agent}} {{reason}}"}}},
	}}},
}

const ruleNS = `rule_namespace=~"$rule_namespace"`

var copyratorRules = spec{
	file: "quartet-copyratorrule", uid: "quartet-copyratorrule", title: "Quartet / CopyratorRule",
	description: "Are the copies there and equal to their sources: copies in sync against desired, conflicts, namespaces that refused, limits reached, and how long a source change takes to reach its copies.",
	vars:        []variable{{name: "rule_namespace", label: "Rule namespace", selector: "quartet_copyrator_copies_in_sync"}},
	rows: []row{{title: "Copies", panels: []panel{
		{title: "Copies not in sync", stat: true, unit: "short",
			description: "Copies the rules should hold that do not equal their source (yet), over all selected rules.",
			queries:     []query{{`sum(quartet_copyrator_copies_desired{` + ruleNS + `}) - sum(quartet_copyrator_copies_in_sync{` + ruleNS + `})`, "not in sync"}}},
		{title: "Rules at a limit", stat: true, unit: "short",
			description: "Rules held back by a limit of the manager (copies per rule, namespaces, sources): their status says which.",
			queries:     []query{{`sum(quartet_copyrator_limit_reached{` + ruleNS + `})`, "at a limit"}}},
		{title: "Copies in sync against desired", unit: "short",
			description: "Per rule: the copies it should hold (sources matched times the namespaces it may copy into) and those that equal their source.",
			queries: []query{{`quartet_copyrator_copies_desired{` + ruleNS + `}`, "{{rule_namespace}}/{{rule}} desired"},
				{`quartet_copyrator_copies_in_sync{` + ruleNS + `}`, "{{rule_namespace}}/{{rule}} in sync"}}},
		{title: "Copy writes", unit: "short",
			description: "Copies created, updated, recreated, deleted, released or failed, per interval.",
			queries:     []query{{`sum by (rule_namespace, rule, action) (increase(quartet_copyrator_copies_total{` + ruleNS + `}[` + rateInterval + `]))`, "{{rule_namespace}}/{{rule}} {{action}}"}}},
		{title: "Source change to copy, 50th and 95th percentile", unit: "s",
			description: "Time from a source's last change (its newest managedFields time) to the write of a copy that carries it, over all rules.",
			queries: []query{{`histogram_quantile(0.5, sum by (le) (rate(quartet_copyrator_propagation_seconds_bucket[` + rateInterval + `])))`, "p50"},
				{`histogram_quantile(0.95, sum by (le) (rate(quartet_copyrator_propagation_seconds_bucket[` + rateInterval + `])))`, "p95"}}},
	}}, {title: "What stops a copy", panels: []panel{
		{title: "Conflicts", unit: "short",
			description: "Target objects a rule leaves alone because it did not make them; alert QuartetCopyratorConflicts.",
			queries:     []query{{`quartet_copyrator_conflicts{` + ruleNS + `}`, "{{rule_namespace}}/{{rule}}"}}},
		{title: "Namespaces that refused", unit: "short",
			description: "Target namespaces whose owner has not consented to the rule's copies (no binding to quartet-copyrator-target for its ServiceAccount).",
			queries:     []query{{`quartet_copyrator_refused_namespaces{` + ruleNS + `}`, "{{rule_namespace}}/{{rule}}"}}},
		{title: "Limits reached", unit: "short",
			description: "1 while a rule is held back by a limit of the manager.",
			queries:     []query{{`quartet_copyrator_limit_reached{` + ruleNS + `}`, "{{rule_namespace}}/{{rule}}"}}},
		{title: "Look-alikes and orphans", unit: "short",
			description: "Objects labelled as copies that no existing rule wrote (ignored), and copies deleted because their rule was deleted without its finalizer.",
			queries: []query{{`sum(increase(quartet_copyrator_lookalikes_total[` + rateInterval + `]))`, "look-alikes"},
				{`increase(quartet_copyrator_orphans_swept_total[` + rateInterval + `])`, "orphans swept"}}},
	}}},
}

const xr = `exchangerate_namespace=~"$exchangerate_namespace"`

var exchangeRates = spec{
	file: "quartet-exchangerate", uid: "quartet-exchangerate", title: "Quartet / ExchangeRate",
	description: "The rates themselves over time, which source gave them, whether the sources agree, how old the publication is, and how the upstreams answer.",
	vars:        []variable{{name: "exchangerate_namespace", label: "Namespace", selector: "quartet_exchangerate_stale"}},
	rows: []row{{title: "Rates", panels: []panel{
		{title: "Rates", unit: "short",
			description: "Each ExchangeRate's rates as written to its ConfigMap: units of the currency one unit of the base buys.",
			queries:     []query{{`quartet_exchangerate_rate{` + xr + `}`, "{{exchangerate_namespace}}/{{exchangerate}} {{currency}}"}}},
		{title: "Age of the publication", unit: "d",
			description: "Days since the publication date of the rate written; alert QuartetExchangeRateStale past the manager's limit (5 days by default).",
			queries:     []query{{`(time() - quartet_exchangerate_publication_timestamp_seconds{` + xr + `}) / 86400`, "{{exchangerate_namespace}}/{{exchangerate}}"}}},
		{title: "Stale or divergent", unit: "short",
			description: "1 while a rate is older than the limit (Stale), or another source's rate differs from it by more than spec.divergenceTolerance (Divergent).",
			queries: []query{{`quartet_exchangerate_stale{` + xr + `}`, "{{exchangerate_namespace}}/{{exchangerate}} stale"},
				{`quartet_exchangerate_divergent{` + xr + `}`, "{{exchangerate_namespace}}/{{exchangerate}} divergent"}}},
		{title: "Source in use", unit: "short",
			description: "The source each rate comes from; a line that changes source is a failover (or the return to the preferred source).",
			queries:     []query{{`quartet_exchangerate_source_in_use{` + xr + `}`, "{{exchangerate_namespace}}/{{exchangerate}} {{source}}"}}},
		{title: "Sources used in the last hour", stat: true, unit: "short",
			description: "Distinct sources each ExchangeRate took its rate from within the hour: more than one means it failed over.",
			queries:     []query{{`count by (exchangerate_namespace, exchangerate) (count_over_time(quartet_exchangerate_source_in_use{` + xr + `}[1h]))`, "{{exchangerate_namespace}}/{{exchangerate}}"}}},
	}}, {title: "Upstreams", panels: []panel{
		{title: "Requests by source and result", unit: "reqps",
			description: "Requests to each rate source: ok, not_modified, server_error, rejected, timeout, unreachable, malformed.",
			queries:     []query{{`sum by (source, result) (rate(quartet_exchangerate_upstream_requests_total[` + rateInterval + `]))`, "{{source}} {{result}}"}}},
		{title: "Fetch time, 95th percentile", unit: "s",
			description: "Time from a request to a parsed table or a failure, by source.",
			queries:     []query{{`histogram_quantile(0.95, sum by (source, le) (rate(quartet_exchangerate_upstream_fetch_duration_seconds_bucket[` + rateInterval + `])))`, "{{source}}"}}},
		{title: "Since the last usable answer", unit: "s",
			description: "Seconds since each source last answered with a usable table (200 or 304).",
			queries:     []query{{`time() - quartet_exchangerate_last_successful_fetch_timestamp_seconds`, "{{source}}"}}},
	}}},
}

const mirror = `mirror_namespace=~"$mirror_namespace"`

var registryMirrors = spec{
	file: "quartet-registrymirror", uid: "quartet-registrymirror", title: "Quartet / RegistryMirror",
	description: "What the mirrors serve and from where, whether they could serve with the upstream gone, how full their caches are and when they fill, the images pinned and held.",
	vars:        []variable{{name: "mirror_namespace", label: "Mirror namespace", selector: "quartet_registrymirror_ready"}},
	rows: []row{{title: "Serving", panels: []panel{
		{title: "Ready", stat: true, unit: "short",
			description: "1 while the mirror's Ready condition is True; alert QuartetRegistryMirrorNotReady.",
			queries:     []query{{`quartet_registrymirror_ready{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Upstream reachable", stat: true, unit: "short",
			description: "1 while the mirror's registry reaches its upstream (condition UpstreamReachable); at 0 the mirror serves what its cache holds.",
			queries:     []query{{`quartet_registrymirror_upstream_reachable{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Hit ratio, last hour", stat: true, unit: "percentunit",
			description: "Blob pulls served from the cache, of all blob pulls, over the last hour.",
			queries: []query{{`sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_blob_pulls_total{` + mirror + `, result="hit"}[1h])) / sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_blob_pulls_total{` + mirror + `}[1h]))`,
				"{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Registry replicas serving", stat: true, unit: "short",
			description: "Ready replicas of the mirror's registry StatefulSet.",
			queries:     []query{{`quartet_registrymirror_ready_replicas{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Blob pulls by source", unit: "reqps",
			description: "Blob GETs (layers, configs) served from the cache (hit) or fetched from the upstream (miss), as the registry reports every 30 s.",
			queries:     []query{{`sum by (mirror_namespace, mirror, result) (rate(quartet_registrymirror_blob_pulls_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} {{result}}"}}},
		{title: "Bytes served by source", unit: "Bps",
			description: "Bytes of blobs served from the cache or fetched from the upstream.",
			queries:     []query{{`sum by (mirror_namespace, mirror, source) (rate(quartet_registrymirror_served_bytes_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} {{source}}"}}},
		{title: "Upstream bytes fetched", unit: "Bps",
			description: "Bytes the registry fetched from the upstream for blobs, each blob once however many pulls waited for it; below the bytes served from the upstream when pulls were coalesced.",
			queries: []query{{`sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_upstream_fetched_bytes_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} fetched"},
				{`sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_served_bytes_total{` + mirror + `, source="upstream"}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} served from the upstream"}}},
		{title: "Upstream fetches and waiters coalesced", unit: "reqps",
			description: "Blob fetches the registry started from the upstream and those that failed, and the requests (blob or manifest) that waited for another's fetch instead of starting their own.",
			queries: []query{{`sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_upstream_fetches_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} fetches"},
				{`sum by (mirror_namespace, mirror) (rate(quartet_registrymirror_upstream_fetch_failures_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} failed fetches"},
				{`sum by (mirror_namespace, mirror, kind) (rate(quartet_registrymirror_coalesced_waiters_total{` + mirror + `}[` + rateInterval + `]))`, "{{mirror_namespace}}/{{mirror}} {{kind}} waiters"}}},
		{title: "Pulls served while the upstream was unreachable", unit: "short",
			description: "Blob pulls served from the cache while the upstream was unreachable: what the mirror is for.",
			queries: []query{{`sum by (mirror_namespace, mirror) (increase(quartet_registrymirror_blob_pulls_total{` + mirror + `, result="hit"}[` + rateInterval + `])) and on (mirror_namespace, mirror) (quartet_registrymirror_upstream_reachable{` + mirror + `} == 0)`,
				"{{mirror_namespace}}/{{mirror}}"}}},
	}}, {title: "Cache", panels: []panel{
		{title: "Cache volume fill", unit: "percentunit",
			description: "Used of capacity of each mirror's cache volume; alert QuartetRegistryMirrorCacheAlmostFull above 90 %.",
			queries: []query{{`quartet_registrymirror_cache_used_bytes{` + mirror + `} / quartet_registrymirror_cache_capacity_bytes{` + mirror + `}`,
				"{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Days until the cache is full", stat: true, unit: "d",
			description: "Free bytes divided by the growth of the last six hours; no value while the cache does not grow.",
			queries: []query{{`(quartet_registrymirror_cache_capacity_bytes{` + mirror + `} - quartet_registrymirror_cache_used_bytes{` + mirror + `}) / (deriv(quartet_registrymirror_cache_used_bytes{` + mirror + `}[6h]) > 0) / 86400`,
				"{{mirror_namespace}}/{{mirror}}"}}},
		{title: "Images in use, pinned and held", unit: "short",
			description: "With node access: images by digest the cluster's pods run from the mirror's host, those pinned and warmed (at most --registrymirror-max-pinned-images), and those the registry holds whole; alert QuartetRegistryMirrorImagesNotCached.",
			queries: []query{{`quartet_registrymirror_images_in_use{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}} in use"},
				{`quartet_registrymirror_pinned_images{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}} pinned"},
				{`quartet_registrymirror_images_cached{` + mirror + `}`, "{{mirror_namespace}}/{{mirror}} held"}}},
		{title: "Child object writes", unit: "short",
			description: "Writes to the mirrors' Services, StatefulSets, DaemonSets, PVCs and NetworkPolicies, by kind and result; flat in a steady cluster.",
			queries:     []query{{`sum by (kind, result) (increase(quartet_registrymirror_object_writes_total[` + rateInterval + `]))`, "{{kind}} {{result}}"}}},
	}}},
}
