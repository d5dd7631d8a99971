// Package jsonfields lists a struct type's fields by the member names
// encoding/json gives them: the name in the field's json tag, else the
// field's own; unexported fields and those tagged "-" have none. It is for
// checks that hold a JSON object's members to a Go type's (a browser's
// frame, a worker's decision, a script), so the type stays the one list;
// Kind names, for their error texts, what JSON value a field takes.
// Embedded structs are not flattened: none of the types it is given has
// one. Unknown finds, at any depth, a JSON member a type has no field for.
// Its functions are pure and safe for concurrent use.
package jsonfields
