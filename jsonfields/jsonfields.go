package jsonfields

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
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
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return Kind(t.Elem())
	default:
		return "an object"
	}
}

// Article puts "a" or "an" before a JSON value's kind as encoding/json's
// UnmarshalTypeError names it ("number", "array", "bool", ...), and says a
// number that is one ("number 1.5") as a number.
func Article(kind string) string {
	switch {
	case kind == "bool":
		return "a boolean"
	case strings.HasPrefix(kind, "number"):
		return "a number"
	case strings.HasPrefix(kind, "a") || strings.HasPrefix(kind, "o"):
		return "an " + kind
	}
	return "a " + kind
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// Unknown returns the path of the first member of the JSON value data that
// t has no field for, at any depth (within t's struct, slice, array, map and
// pointer fields): "tools[0].inputs"; "" when every member is t's. allow
// names members t's top level may have besides (an action's "type").
// Members match field names as encoding/json matches them, in any case. A
// json.RawMessage field is free JSON and not looked into; neither is data
// that does not decode, whose fault json.Unmarshal says.
func Unknown(data []byte, t reflect.Type, allow ...string) string {
	return unknown(data, t, "", allow)
}

// unknown walks data one level at a time, as raw members: what a
// json.RawMessage field holds (a tool's result, a schema: megabytes, maybe)
// is skipped, never decoded.
func unknown(data []byte, t reflect.Type, path string, allow []string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return ""
		}
		fields := Of(t)
		// In name order, so the first unknown member is always the same.
		for _, name := range slices.Sorted(maps.Keys(obj)) {
			i := slices.IndexFunc(fields, func(f Field) bool { return strings.EqualFold(f.Name, name) })
			at := name
			if path != "" {
				at = path + "." + name
			}
			if i < 0 {
				if slices.ContainsFunc(allow, func(a string) bool { return strings.EqualFold(a, name) }) {
					continue
				}
				return at
			}
			if p := unknown(obj[name], fields[i].Type, at, nil); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return ""
		}
		for i, e := range arr {
			if p := unknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), nil); p != "" {
				return p
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if p := unknown(obj[k], t.Elem(), path+"."+k, nil); p != "" {
				return p
			}
		}
	}
	return ""
}
