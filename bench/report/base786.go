package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The baseline of BenchmarkAdminSmall: the admin API at 10 keys as
// 786b47c served it, the commit before the operator's surface was rebuilt.

// base786Rev is the baseline's commit.
const base786Rev = "786b47c"

// base786Files are the files of this directory the baseline's test binary
// is built with, in a copy of base786Rev's bench directory: the benchmark,
// and the operator's surface of that commit (build tag base786).
var base786Files = []string{"adminsmall_test.go", "adminsurface_base786_test.go"}

// buildBase786 extracts base786Rev from git (git archive, so that the
// repository gains no worktree) into tmp/base786, adds base786Files to its
// bench directory, builds its test binary with the tag base786 and returns
// the binary's path.
func buildBase786(tmp string) (string, error) {
	dir := filepath.Join(tmp, "base786")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := extract(base786Rev, dir); err != nil {
		return "", err
	}
	for _, f := range base786Files {
		if err := copyFile(f, filepath.Join(dir, "bench", f)); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(tmp, "bench-"+base786Rev+".test")
	build := exec.Command("go", "test", "-c", "-tags", "base786", "-o", bin, ".")
	build.Dir, build.Stdout, build.Stderr = filepath.Join(dir, "bench"), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building %s's benchmarks: %w", base786Rev, err)
	}
	return bin, nil
}

// extract writes the tree of commit rev into dir: git archive, read by
// tar as it writes.
func extract(rev, dir string) error {
	archive := exec.Command("git", "archive", rev)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin, archive.Stderr, untar.Stderr = pipe, os.Stderr, os.Stderr
	if err := archive.Start(); err != nil {
		return err
	}
	untarErr := untar.Run() // reads the archive to its end before Wait closes the pipe
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w", rev, err)
	}
	if untarErr != nil {
		return fmt.Errorf("extracting %s: %w", rev, untarErr)
	}
	return nil
}

// copyFile copies the file src to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
