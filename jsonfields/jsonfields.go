// Package jsonfields lists a struct type's fields by the member names
// encoding/json gives them: the name in the field's json tag, else the
// field's own; unexported fields and those tagged "-" have none. It is for
// checks that hold a JSON object's members to a Go type's (a browser's
// frame, a worker's decision, a script), so the type stays the one list;
// Kind names, for their error texts, what JSON value a field takes.
// Embedded structs are not flattened: none of the types it is given has
// one. Its functions are pure and safe for concurrent use.
package jsonfields

import (
	"reflect"
	"strings"
)

// Field is one member of an object of a struct type.
type Field struct {
	Name string
	Type reflect.Type
}

// Of lists t's members in the order of its fields; t is a struct type.
func Of(t reflect.Type) []Field {
	fields := make([]Field, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		fields = append(fields, Field{Name: name, Type: f.Type})
	}
	return fields
}

// Names lists t's member names, in order.
func Names(t reflect.Type) []string {
	fields := Of(t)
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}

// Kind names the JSON value that decodes into t, as a person writing JSON
// says it: "a string", "a number", "a boolean", "an array", "an object".
func Kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return Kind(t.Elem())
	default:
		return "an object"
	}
}
