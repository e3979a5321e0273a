package e2e

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksResolve fails on a relative link in the repository's
// Markdown (README.md, docs/, benchmarks/) whose file is missing, or whose
// #anchor names no heading of the Markdown file it points at: docs move,
// and a newcomer following a dead link learns nothing.
func TestDocsLinksResolve(t *testing.T) {
	broken, err := brokenLinks("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// TestBrokenLinksFindsThem: the checker reports a missing file, a missing
// anchor and a missing anchor in the same file, and passes the good links,
// the external ones and what is inside code.
func TestBrokenLinksFindsThem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n## Over HTTP/JSON\n\n"+
		"[guide](docs/GUIDE.md#from-go) [gone](docs/GONE.md) [bad anchor](docs/GUIDE.md#nowhere)\n"+
		"[self](#over-httpjson) [self bad](#missing) [web](https://example.com/x.md) ![img](docs/pic.svg)\n"+
		"`[code](docs/NOPE.md)`\n\n```\n[fenced](docs/NOPE.md)\n```\n")
	write("docs/GUIDE.md", "# Guide\n\n## From Go\n\n## The `baton lock` command\n\n"+
		"[up](../README.md#top) [code](../main.go) [cli](#the-baton-lock-command)\n")
	write("docs/pic.svg", "<svg/>")
	write("main.go", "package main\n")
	got, err := brokenLinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:5: docs/GONE.md: no such file",
		"README.md:5: docs/GUIDE.md#nowhere: no heading with that anchor",
		"README.md:6: #missing: no heading with that anchor",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadmeTestCommandIsCIs: README's opening block names the command
// that runs every test, and .ci/run must run exactly that command.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || strings.Contains(string(readme[:strings.Index(string(readme), "```sh")]), "\n## ") {
		t.Fatal("README does not open with a sh block of its commands")
	}
	var test string
	for _, line := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); strings.HasPrefix(cmd, "go test ") {
			test = cmd
		}
	}
	if test == "" {
		t.Fatalf("README's opening block has no go test command:\n%s", block)
	}
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.TrimSpace(line) == test {
			return
		}
	}
	t.Errorf(".ci/run does not run README's test command %q", test)
}

var (
	// mdLink matches an inline link or image: [text](target) or
	// [text](target "title").
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// mdRefDef matches a reference definition: [name]: target.
	mdRefDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(\S+)`)
	// codeSpan matches inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// urlScheme matches a target with a scheme (https:, mailto:): not a
	// file of the repository.
	urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// brokenLinks returns, as "file:line: target: why", every relative link in
// the Markdown files under root (outside third_party, testdata and hidden
// directories) that does not resolve.
func brokenLinks(root string) ([]string, error) {
	var broken []string
	anchors := map[string]map[string]bool{} // Markdown file -> its headings' anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		a, err := headingAnchors(path)
		anchors[path] = a
		return a, err
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		return eachProseLine(path, func(n int, line string) error {
			line = codeSpan.ReplaceAllString(line, "")
			var targets []string
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := mdRefDef.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if urlScheme.MatchString(target) || strings.HasPrefix(target, "//") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file", filepath.ToSlash(rel), n, target))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					return err
				}
				if !a[anchor] {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading with that anchor", filepath.ToSlash(rel), n, target))
				}
			}
			return nil
		})
	})
	return broken, err
}

// eachProseLine calls f with every line of the Markdown file at path
// (numbered from 1) outside fenced code blocks.
func eachProseLine(path string, f func(n int, line string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// headingAnchors returns the anchors GitHub gives the headings of the
// Markdown file at path: lower case, punctuation (and code spans'
// backquotes) dropped, spaces as hyphens, and -1, -2 ... after a repeated
// one.
func headingAnchors(path string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := eachProseLine(path, func(_ int, line string) error {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			return nil
		}
		text = strings.TrimLeft(text, "#")
		if text != "" && text[0] != ' ' {
			return nil
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
		return nil
	})
	return anchors, err
}
