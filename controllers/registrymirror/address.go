package registrymirror

import "github.com/quartet-operator/quartet/internal/egress"

// The probes dial under the manager's one rule for addresses a custom resource names
// (internal/egress, shared with the ChaosAgent's HTTP guards; its tests hold the rule case
// by case).

// errAddressRefused is what a probe returns when its upstream's address may not be dialed.
var errAddressRefused = egress.ErrAddressRefused
