package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// StatusError is an HTTP answer whose status code was not the one wanted.
type StatusError struct{ Code int }

func (e StatusError) Error() string { return fmt.Sprintf("answered HTTP %d", e.Code) }

// What status and Events say about a failed request, in place of the error's text: the
// text can carry whatever the other end sent (a banner, an internal host name), and the
// author of a resource chooses the other end. The manager's log has the text.
const (
	PhraseAddressRefused = "address not allowed for probes (loopback, link-local or metadata)"
	PhraseNoName         = "the host name did not resolve"
	PhraseRefused        = "connection refused"
	PhraseNoRoute        = "no route to the address"
	PhraseTimedOut       = "timed out"
	PhraseTLS            = "TLS handshake failed"
	PhraseClosed         = "the connection closed without an answer"
	PhraseNotHTTP        = "the answer was not HTTP"
	PhraseErrorStatus    = "answered with an HTTP error status"
	PhraseOther          = "the request failed (details in the manager's log)"
)

// Failure is the phrase status and Events use for a failed request's error.
func Failure(err error) string {
	var (
		dnsErr *net.DNSError
		status StatusError
		netErr net.Error
	)
	switch {
	case errors.Is(err, ErrAddressRefused):
		return PhraseAddressRefused
	case errors.As(err, &status):
		return PhraseErrorStatus
	case errors.As(err, &dnsErr):
		return PhraseNoName
	case errors.Is(err, syscall.ECONNREFUSED):
		return PhraseRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return PhraseNoRoute
	case isTLSFailure(err):
		return PhraseTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return PhraseTimedOut
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return PhraseClosed
	case strings.Contains(err.Error(), "malformed HTTP"):
		// net/http has no error type for an answer that is not HTTP.
		return PhraseNotHTTP
	}
	return PhraseOther
}

// isTLSFailure says whether err comes from a TLS handshake that did not succeed.
func isTLSFailure(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		op      *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		// An alert from the other end (crypto/tls has no exported type for it over TCP).
		errors.As(err, &op) && op.Op == "remote error" ||
		// net/http's answer to a plain HTTP server behind an https:// upstream.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
