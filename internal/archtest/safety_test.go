package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// safetyProperties is how many safety properties the contract has
// (DESIGN.md section 5, the contract in docs/ARCHITECTURE.md).
const safetyProperties = 8

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	testRef    = regexp.MustCompile(`^([A-Za-z0-9_./-]+)\.((?:Test|Fuzz)[A-Za-z0-9_]*)$`)
)

// TestSafetyTable keeps the table of safety properties in
// docs/ARCHITECTURE.md true to the tree: every property has a row, every
// row names a test, and every test it names (dir.TestName, baton for the
// root package) is a function of a test file in that directory, and every
// file it names exists. A test renamed or deleted fails here, so the
// table cannot promise a guard that is gone.
func TestSafetyTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := safetyRows(t, string(doc))
	if len(rows) != safetyProperties {
		t.Fatalf("the safety table has %d rows, want one for each of the %d properties", len(rows), safetyProperties)
	}
	for i, row := range rows {
		if row.number != strconv.Itoa(i+1) {
			t.Errorf("row %d is numbered %q", i+1, row.number)
		}
		tests := 0
		for _, m := range backticked.FindAllStringSubmatch(row.guards, -1) {
			ref := m[1]
			if tm := testRef.FindStringSubmatch(ref); tm != nil {
				tests++
				if err := testExists(tm[1], tm[2]); err != "" {
					t.Errorf("property %s names %s: %s", row.number, ref, err)
				}
				continue
			}
			if !strings.Contains(ref, "/") {
				t.Errorf("property %s names %q: neither dir.Test nor a file path", row.number, ref)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
				t.Errorf("property %s names the file %s: %v", row.number, ref, err)
			}
		}
		if tests == 0 {
			t.Errorf("property %s (%s) names no test", row.number, row.property)
		}
	}
}

type safetyRow struct{ number, property, guards string }

// safetyRows returns the rows of the table that follows "**Safety
// properties**" in doc.
func safetyRows(t *testing.T, doc string) []safetyRow {
	_, after, ok := strings.Cut(doc, "**Safety properties**")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no **Safety properties**")
	}
	var rows []safetyRow
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("a row of the safety table without three cells: %s", line)
		}
		n := strings.TrimSpace(cells[0])
		if n == "#" || strings.Trim(n, "-") == "" {
			continue // the header and its rule
		}
		rows = append(rows, safetyRow{n, strings.TrimSpace(cells[1]), cells[2]})
	}
	return rows
}

// testExists reports why dir (baton: the root) has no test file with
// func name, or "" if it has.
func testExists(dir, name string) string {
	if dir == "baton" {
		dir = "."
	}
	files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		return "no test files in " + dir
	}
	decl := regexp.MustCompile(`(?m)^func ` + name + `\(`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err.Error()
		}
		if decl.Match(src) {
			return ""
		}
	}
	return "no func " + name + " in " + dir + "/*_test.go"
}
