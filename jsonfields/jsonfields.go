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
