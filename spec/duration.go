package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a string with a unit: "250ms",
// "10s", "1m". A bare number is refused because nobody can tell whether 30
// meant seconds or milliseconds.
type Duration struct{ time.Duration }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return d.Duration }

// String drops the zero tails time.Duration prints, so a parsed "1m" is
// shown and marshaled as "1m" rather than "1m0s".
func (d Duration) String() string {
	s := d.Duration.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(data []byte) error { return unmarshalScalar(data, d) }

func (d *Duration) decodeScalar(kind nodeKind, text string) error {
	switch kind {
	case stringNode:
	case numberNode:
		return errNoUnit(text)
	default:
		return fmt.Errorf("expected a duration like \"10s\", got %s", kind)
	}
	v, err := time.ParseDuration(text)
	if err != nil {
		if _, nerr := strconv.ParseFloat(text, 64); nerr == nil {
			return errNoUnit(text)
		}
		return fmt.Errorf("invalid duration %q: write a number with a unit (ms, s, m, h), like \"250ms\" or \"1m\"", text)
	}
	d.Duration = v
	return nil
}

func errNoUnit(number string) error {
	return fmt.Errorf("duration %s has no unit: add one, like \"%ss\" or \"%sms\"", number, number, number)
}
