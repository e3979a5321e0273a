package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// The HTTP/JSON face's own errors, which grpc-gateway answers otherwise:
// a method the path does not take is 405 with an Allow header (the
// gateway's default is 501 without one), and a body over rules.MaxRequestBytes
// is 413 (the gateway reports the body it could not decode as 400).

// route is one HTTP rule of the Baton service: a method and a path
// template's segments ("{name}" matches any one segment, "**" the rest).
type route struct {
	method string
	segs   []string
}

// routes are the service's HTTP rules, read from baton.proto's
// google.api.http options, which the gateway routes by as well.
var routes = httpRoutes()

func httpRoutes() []route {
	var out []route
	var add func(r *annotations.HttpRule)
	add = func(r *annotations.HttpRule) {
		method, path := "", ""
		switch p := r.GetPattern().(type) {
		case *annotations.HttpRule_Get:
			method, path = http.MethodGet, p.Get
		case *annotations.HttpRule_Put:
			method, path = http.MethodPut, p.Put
		case *annotations.HttpRule_Post:
			method, path = http.MethodPost, p.Post
		case *annotations.HttpRule_Delete:
			method, path = http.MethodDelete, p.Delete
		case *annotations.HttpRule_Patch:
			method, path = http.MethodPatch, p.Patch
		case *annotations.HttpRule_Custom:
			method, path = p.Custom.GetKind(), p.Custom.GetPath()
		}
		if path != "" {
			out = append(out, route{method: method, segs: strings.Split(strings.TrimPrefix(path, "/"), "/")})
		}
		for _, b := range r.GetAdditionalBindings() {
			add(b)
		}
	}
	methods := batonpb.File_api_batonpb_baton_proto.Services().ByName("Baton").Methods()
	for i := range methods.Len() {
		if rule, ok := proto.GetExtension(methods.Get(i).Options(), annotations.E_Http).(*annotations.HttpRule); ok && rule != nil {
			add(rule)
		}
	}
	return out
}

func (r route) matches(path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range r.segs {
		switch {
		case s == "**" || strings.HasPrefix(s, "{") && strings.HasSuffix(s, "=**}"):
			return true
		case i >= len(segs):
			return false
		case strings.HasPrefix(s, "{") || s == "*":
		case s != segs[i]:
			return false
		}
	}
	return len(segs) == len(r.segs)
}

// allowedMethods are the methods the service takes on path, sorted.
func allowedMethods(path string) []string {
	var out []string
	for _, r := range routes {
		if r.matches(path) && !slices.Contains(out, r.method) {
			out = append(out, r.method)
		}
	}
	slices.Sort(out)
	return out
}

// routingError answers a request the gateway found no handler for; a
// method the path does not take gets 405 and the methods it does.
func routingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code != http.StatusMethodNotAllowed {
		runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
		return
	}
	allow := strings.Join(allowedMethods(r.URL.Path), ", ")
	w.Header().Set("Allow", allow)
	runtime.HTTPError(ctx, mux, m, w, r, &runtime.HTTPStatusError{
		HTTPStatus: http.StatusMethodNotAllowed,
		Err:        status.Errorf(codes.Unimplemented, "%s takes %s, not %s", r.URL.Path, allow, r.Method),
	})
}

// httpError is the gateway's error handler: a request whose body was
// over rules.MaxRequestBytes is answered 413, whatever the decoder made of the
// cut-off body.
func httpError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if b, ok := r.Body.(*limitedBody); ok && b.over {
		err = &runtime.HTTPStatusError{
			HTTPStatus: http.StatusRequestEntityTooLarge,
			Err:        status.Errorf(codes.ResourceExhausted, "the request body is over %d bytes, the most one request may have", rules.MaxRequestBytes),
		}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, err)
}

// limitBody is http.MaxBytesHandler whose body remembers that it was cut
// off, for httpError.
func limitBody(h http.Handler, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := new(http.Request)
		*r2 = *r
		r2.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, n)}
		h.ServeHTTP(w, r2)
	})
}

// limitedBody is a request body read through http.MaxBytesReader.
type limitedBody struct {
	io.ReadCloser
	over bool // a read went past the limit
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.over = true
	}
	return n, err
}
