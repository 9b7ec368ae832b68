package jobframework

import (
	"reflect"
	"unique"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// internStrings gives every string of a cached object that other cached
// objects may hold too its one canonical copy (Go's unique package): label
// and annotation keys and values, owner references, the conditions' types,
// reasons and messages, container names, the runtime's fields every job
// repeats. The decoder makes a copy of each per object; a typed object of
// 10 000 alike keeps 10 000 copies otherwise (about 1 KB per job; see
// BenchmarkCacheFootprint). UIDs and resource versions are unique to each
// object and are left as they are. Maps are rebuilt, so that their keys
// are shared too. Unstructured objects (kinds without Go types) are left
// alone: their strings sit behind interfaces.
func internStrings(obj any) {
	if _, ok := obj.(k8sruntime.Unstructured); ok {
		return
	}
	internValue(reflect.ValueOf(obj))
}

var (
	uidType   = reflect.TypeFor[types.UID]()
	bytesType = reflect.TypeFor[[]byte]()
)

// unsharedField names the string field unique to each object that is not
// typed as a UID.
const unsharedField = "ResourceVersion"

// internValue interns the strings reachable from v in place; v must be
// settable, or a pointer.
func internValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			internValue(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() && t.Field(i).Name != unsharedField {
				internValue(f)
			}
		}
	case reflect.Slice:
		if v.Type() == bytesType {
			return
		}
		for i := range v.Len() {
			internValue(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			internValue(v.Index(i))
		}
	case reflect.String:
		if s := v.String(); s != "" && v.Type() != uidType {
			v.SetString(unique.Make(s).Value())
		}
	case reflect.Map:
		if v.Len() == 0 {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		for it := v.MapRange(); it.Next(); {
			k.Set(it.Key())
			internValue(k)
			e.Set(it.Value())
			internValue(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}
}
