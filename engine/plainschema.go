package engine

import (
	"encoding/json"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// schema is one of a tool's compiled JSON Schemas. Most tool schemas are
// an object of typed properties, some required, perhaps an enum or a
// bound: for those, plain answers "valid" in one walk of the value, with
// no allocation. Anything plain does not accept for certain (a value it
// finds wrong, a number on a bound, a keyword it does not know) goes to
// the library, whose verdict and words stand: plain never refuses.
type schema struct {
	compiled *jsonschema.Schema
	plain    *plainSchema // nil: the schema uses keywords plain leaves to the library
}

func newSchema(compiled *jsonschema.Schema) *schema {
	return &schema{compiled: compiled, plain: plainOf(compiled, 0)}
}

// Validate reports whether v, as decodeJSON reads it, conforms.
func (s *schema) Validate(v any) error {
	if s.plain != nil && s.plain.accepts(v) {
		return nil
	}
	return s.compiled.Validate(v)
}

// jsonTypes is a set of JSON Schema types.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeInteger
	typeNumber
	typeString
	typeArray
	typeObject
)

var jsonTypeNames = map[string]jsonTypes{
	"null": typeNull, "boolean": typeBoolean, "integer": typeInteger, "number": typeNumber,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// plainSchema is a compiled schema that keeps to type, enum (of strings,
// booleans and null), properties, required, additionalProperties, items
// (one schema for every item), the length and count bounds, and minimum,
// maximum and their exclusive forms. The library has already read the
// document, whatever its draft, into those fields.
type plainSchema struct {
	anything bool      // the schema `true`
	types    jsonTypes // 0: any type
	enum     []any     // nil: no enum
	props    map[string]*plainSchema
	required []string
	noExtra  bool         // additionalProperties: false
	extra    *plainSchema // additionalProperties' schema; nil: anything (unless noExtra)
	items    *plainSchema // nil: anything

	minProps, maxProps, minItems, maxItems, minLen, maxLen int // -1: unbounded

	min, max, xmin, xmax bound
}

// bound is a number bound as the nearest float64. A value's float is
// compared strictly: rounding to nearest keeps order, so a float strictly
// past the bound's is a value past the bound; equal floats are left to the
// library's exact numbers.
type bound struct {
	set bool
	f   float64
}

func boundOf(r *big.Rat) bound {
	if r == nil {
		return bound{}
	}
	f, _ := r.Float64()
	return bound{set: true, f: f}
}

// maxPlainDepth bounds the schemas plain walks: a deeper one is the
// library's.
const maxPlainDepth = 16

// plainOf returns s as a plainSchema, or nil when s uses anything else.
func plainOf(s *jsonschema.Schema, depth int) *plainSchema {
	if s == nil || depth > maxPlainDepth {
		return nil
	}
	if s.Always != nil {
		if *s.Always {
			return &plainSchema{anything: true}
		}
		return nil
	}
	if s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil || s.Not != nil ||
		len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.If != nil ||
		len(s.Constant) > 0 || s.Format != "" || len(s.Extensions) > 0 ||
		s.PropertyNames != nil || s.RegexProperties || len(s.PatternProperties) > 0 ||
		len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 ||
		s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
		s.UniqueItems || s.AdditionalItems != nil || len(s.PrefixItems) > 0 || s.Contains != nil ||
		s.Pattern != nil || s.ContentEncoding != "" || s.ContentMediaType != "" || s.ContentSchema != nil ||
		s.MultipleOf != nil {
		return nil
	}
	p := &plainSchema{
		minProps: s.MinProperties, maxProps: s.MaxProperties,
		minItems: s.MinItems, maxItems: s.MaxItems,
		minLen: s.MinLength, maxLen: s.MaxLength,
		min: boundOf(s.Minimum), max: boundOf(s.Maximum),
		xmin: boundOf(s.ExclusiveMinimum), xmax: boundOf(s.ExclusiveMaximum),
		required: s.Required,
	}
	for _, name := range s.Types {
		t, ok := jsonTypeNames[name]
		if !ok {
			return nil
		}
		p.types |= t
	}
	if len(s.Enum) > 0 {
		for _, e := range s.Enum {
			switch e.(type) {
			case string, bool, nil:
			default:
				return nil // numbers, arrays and objects compare by the library's rules
			}
		}
		p.enum = s.Enum
	}
	if len(s.Properties) > 0 {
		p.props = make(map[string]*plainSchema, len(s.Properties))
		for name, sub := range s.Properties {
			if p.props[name] = plainOf(sub, depth+1); p.props[name] == nil {
				return nil
			}
		}
	}
	switch extra := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		p.noExtra = !extra
	case *jsonschema.Schema:
		if p.extra = plainOf(extra, depth+1); p.extra == nil {
			return nil
		}
	default:
		return nil
	}
	var items *jsonschema.Schema
	switch it := s.Items.(type) {
	case nil:
		items = s.Items2020
	case *jsonschema.Schema:
		if s.Items2020 != nil {
			return nil
		}
		items = it
	default:
		return nil // a tuple
	}
	if items != nil {
		if p.items = plainOf(items, depth+1); p.items == nil {
			return nil
		}
	}
	return p
}

// accepts reports whether v certainly conforms; false means "ask the
// library", not "invalid".
func (p *plainSchema) accepts(v any) bool {
	if p.anything {
		return true
	}
	switch v := v.(type) {
	case nil:
		if !p.allows(typeNull) {
			return false
		}
	case bool:
		if !p.allows(typeBoolean) {
			return false
		}
	case string:
		if !p.allows(typeString) {
			return false
		}
		if p.minLen >= 0 || p.maxLen >= 0 {
			n := utf8.RuneCountInString(v)
			if (p.minLen >= 0 && n < p.minLen) || (p.maxLen >= 0 && n > p.maxLen) {
				return false
			}
		}
	case json.Number:
		if !p.allows(typeNumber) && !(p.allows(typeInteger) && plainInteger(v)) {
			return false
		}
		if p.min.set || p.max.set || p.xmin.set || p.xmax.set {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil ||
				(p.min.set && !(f > p.min.f)) || (p.xmin.set && !(f > p.xmin.f)) ||
				(p.max.set && !(f < p.max.f)) || (p.xmax.set && !(f < p.xmax.f)) {
				return false
			}
		}
	case []any:
		if !p.allows(typeArray) ||
			(p.minItems >= 0 && len(v) < p.minItems) || (p.maxItems >= 0 && len(v) > p.maxItems) {
			return false
		}
		if p.items != nil {
			for _, item := range v {
				if !p.items.accepts(item) {
					return false
				}
			}
		}
	case map[string]any:
		if !p.allows(typeObject) ||
			(p.minProps >= 0 && len(v) < p.minProps) || (p.maxProps >= 0 && len(v) > p.maxProps) {
			return false
		}
		for _, name := range p.required {
			if _, ok := v[name]; !ok {
				return false
			}
		}
		for name, value := range v {
			sub, declared := p.props[name]
			switch {
			case declared:
			case p.noExtra:
				return false
			case p.extra != nil:
				sub = p.extra
			default:
				continue
			}
			if !sub.accepts(value) {
				return false
			}
		}
	default:
		return false // decodeJSON makes no other type
	}
	if p.enum != nil {
		for _, e := range p.enum {
			if e == v {
				return true
			}
		}
		return false
	}
	return true
}

func (p *plainSchema) allows(t jsonTypes) bool { return p.types == 0 || p.types&t != 0 }

// plainInteger: digits after an optional minus, which the library counts
// an integer too; it also counts 1.0 and 1e2, which are left to it.
func plainInteger(n json.Number) bool {
	s := string(n)
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
