package kafkaserver

import (
	"reflect"
	"sync"
)

// Error codes in responses, for fjord_kafka_errors_total (Kafka's
// ErrorsPerSec): every nonzero ErrorCode a response carries, at the top
// and in its topics, partitions, groups and members, counted by API and
// error. Handlers set codes in many places; reading them back off the
// finished response is the one place that sees them all.
//
// kmsg responses are plain structs, so the codes are found by
// reflection, along paths worked out once per response type: a Fetch
// response is walked through its topics and partitions only, never its
// record bytes.

// codePlan says where a struct type's error codes are.
type codePlan struct {
	codes  []int        // fields named ErrorCode, of kind int16
	nested []nestedPlan // fields that hold structs with codes
}

type nestedPlan struct {
	field int
	plan  *codePlan
}

var codePlans sync.Map // reflect.Type (a struct type) -> *codePlan, nil when it holds no codes

// planFor returns t's plan, or nil when no value of t can hold a code.
func planFor(t reflect.Type) *codePlan {
	t = elemType(t)
	if p, ok := codePlans.Load(t); ok { // every response after its type's first
		return p.(*codePlan)
	}
	return planForVisiting(t, map[reflect.Type]bool{})
}

// elemType is what t points to or holds, through pointers, slices and
// arrays.
func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t
}

func planForVisiting(t reflect.Type, visiting map[reflect.Type]bool) *codePlan {
	t = elemType(t)
	if t.Kind() != reflect.Struct || visiting[t] {
		return nil
	}
	if p, ok := codePlans.Load(t); ok {
		return p.(*codePlan)
	}
	visiting[t] = true
	p := &codePlan{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
			p.codes = append(p.codes, i)
			continue
		}
		if np := planForVisiting(f.Type, visiting); np != nil {
			p.nested = append(p.nested, nestedPlan{field: i, plan: np})
		}
	}
	delete(visiting, t)
	if len(p.codes) == 0 && len(p.nested) == 0 {
		p = nil
	}
	codePlans.Store(t, p)
	return p
}

// eachErrorCode calls f with each nonzero error code in resp.
func eachErrorCode(resp any, f func(code int16)) {
	v := reflect.ValueOf(resp)
	if !v.IsValid() {
		return
	}
	if p := planFor(v.Type()); p != nil {
		walkCodes(v, p, f)
	}
}

func walkCodes(v reflect.Value, p *codePlan, f func(int16)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkCodes(v.Elem(), p, f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkCodes(v.Index(i), p, f)
		}
	case reflect.Struct:
		for _, i := range p.codes {
			if c := int16(v.Field(i).Int()); c != 0 {
				f(c)
			}
		}
		for _, n := range p.nested {
			walkCodes(v.Field(n.field), n.plan, f)
		}
	}
}
