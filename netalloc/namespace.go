package netalloc

import "fmt"

// Namespace runs fn inside a network namespace. nil means the calling
// process's own (the host).
//
// netalloc never enters a namespace itself: the sandbox package owns them,
// and keeping the thread juggling in one place keeps a leaked thread in a
// wrong namespace a one-package bug.
type Namespace interface{ Do(fn func() error) error }

// inNamespace runs fn in ns. An error from entering the namespace is
// returned apart from fn's own, because fn's errors are classified (and
// maybe retried) and a namespace that cannot be entered is neither.
func inNamespace(ns Namespace, network string, fn func() error) error {
	if ns == nil {
		return fn()
	}
	ran := false
	err := ns.Do(func() error {
		ran = true
		return fn()
	})
	if err != nil && !ran {
		return &enterError{network: network, err: err}
	}
	return err
}

type enterError struct {
	network string
	err     error
}

func (e *enterError) Error() string {
	return fmt.Sprintf("enter network namespace of %s: %v", e.network, e.err)
}
func (e *enterError) Unwrap() error { return e.err }
