package v1alpha1

// Condition types of a RegistryMirror (status.conditions[].type). RegistryHostGrant has no
// conditions; should it get some, a type or reason of the same value shares the constant.
const (
	// ConditionReady is True when the registry and every node agent are rolled out and ready.
	ConditionReady = "Ready"
	// ConditionDegraded is True when an object could not be applied, belongs to someone
	// else, the host port is taken, or the upstream is invalid.
	ConditionDegraded = "Degraded"
	// ConditionUpstreamReachable says whether the upstream answers the manager's probe.
	// False does not make the mirror unready once the upstream has answered: the cache
	// keeps serving what it holds, which is what a mirror is for.
	ConditionUpstreamReachable = "UpstreamReachable"
	// ConditionNodeAccess is True when a RegistryHostGrant lets the mirror onto the nodes.
	ConditionNodeAccess = "NodeAccess"
)

// Ready reasons of a RegistryMirror. While several things are missing, Ready's reason is the
// first of them in this order.
const (
	// ReasonMirrorReady is Ready's (True) when the registry serves and, with node access,
	// the node agents are ready.
	ReasonMirrorReady = "MirrorReady"
	// ReasonRegistryMissing is set while the registry StatefulSet does not exist.
	ReasonRegistryMissing = "RegistryMissing"
	// ReasonCacheVolumePending is set while the cache volume's claim is not bound.
	ReasonCacheVolumePending = "CacheVolumePending"
	// ReasonRegistryRollingOut is set while the registry StatefulSet rolls out.
	ReasonRegistryRollingOut = "RegistryRollingOut"
	// ReasonRegistryNotReady is set while a registry replica is not ready.
	ReasonRegistryNotReady = "RegistryNotReady"
	// ReasonNodeAccessNotGranted is set when spec.configureNodes asks for the nodes and no
	// RegistryHostGrant allows it.
	ReasonNodeAccessNotGranted = "NodeAccessNotGranted"
	// ReasonNodeAgentMissing is set while the node agent DaemonSet does not exist.
	ReasonNodeAgentMissing = "NodeAgentMissing"
	// ReasonNodeAgentsRollingOut is set while the node agent DaemonSet rolls out.
	ReasonNodeAgentsRollingOut = "NodeAgentsRollingOut"
	// ReasonNodeAgentsNotReady is set while a node agent is not ready.
	ReasonNodeAgentsNotReady = "NodeAgentsNotReady"
	// ReasonRegistryNotAnswering is set when the registry does not answer GET /v2/ through
	// its Service.
	ReasonRegistryNotAnswering = "RegistryNotAnswering"
	// ReasonUpstreamNeverReached is set while the upstream has never answered.
	ReasonUpstreamNeverReached = "UpstreamNeverReached"
	// ReasonUpstreamAddressRefused is set when the upstream's address is one the manager's
	// probes may not dial.
	ReasonUpstreamAddressRefused = "UpstreamAddressRefused"
)

// UpstreamReachable reasons of a RegistryMirror.
const (
	// ReasonReachable is UpstreamReachable's (True) when the upstream answers GET /v2/.
	ReasonReachable = "Reachable"
	// ReasonUnreachable is UpstreamReachable's (False) when an upstream that has answered
	// before does not answer now.
	ReasonUnreachable = "Unreachable"
	// ReasonNeverReached is UpstreamReachable's (False) while the upstream has never
	// answered.
	ReasonNeverReached = "NeverReached"
	// ReasonNotProbed is UpstreamReachable's (Unknown) before the first probe, or when the
	// manager does not probe upstreams.
	ReasonNotProbed = "NotProbed"
	// ReasonAddressRefused is UpstreamReachable's (False) when the upstream resolves to an
	// address the manager's probes may not dial (loopback, link-local, metadata); a rule,
	// not a network failure.
	ReasonAddressRefused = "AddressRefused"
)

// Degraded reasons of a RegistryMirror. While several things went wrong, Degraded's reason
// is the first.
const (
	// ReasonAsExpected is Degraded's (False) when every object is applied and owned by the
	// mirror.
	ReasonAsExpected = "AsExpected"
	// ReasonObjectConflict is set when an object of a child's name exists and is not
	// controlled by the mirror; it is left alone.
	ReasonObjectConflict = "ObjectConflict"
	// ReasonApplyFailed is set when applying or reverting a child failed.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonHostPortConflict is set when spec.hostPort is used by another mirror's node
	// agents.
	ReasonHostPortConflict = "HostPortConflict"
	// ReasonHostPortsExhausted is set when no host port is left to assign.
	ReasonHostPortsExhausted = "HostPortsExhausted"
	// ReasonInvalidUpstream is set when spec.upstream cannot be used; it is also
	// NodeAccess's (Unknown) reason then.
	ReasonInvalidUpstream = "InvalidUpstream"
)

// NodeAccess reasons of a RegistryMirror.
const (
	// ReasonGranted is NodeAccess's (True) when a RegistryHostGrant for the upstream's host
	// names the mirror.
	ReasonGranted = "Granted"
	// ReasonNoHostGrant is NodeAccess's (False) when no RegistryHostGrant is for the
	// upstream's host.
	ReasonNoHostGrant = "NoHostGrant"
	// ReasonHostGrantedToAnotherMirror is NodeAccess's (False) when the oldest grant for the
	// host names another mirror.
	ReasonHostGrantedToAnotherMirror = "HostGrantedToAnotherMirror"
	// ReasonCredentialsNotGranted is NodeAccess's (False) when the mirror has
	// spec.credentialsSecretRef and its grant does not allow credentials.
	ReasonCredentialsNotGranted = "CredentialsNotGranted"
	// ReasonPlainHTTPNotGranted is NodeAccess's (False) when the upstream is http:// and the
	// grant does not allow plain HTTP.
	ReasonPlainHTTPNotGranted = "PlainHTTPNotGranted"
)
