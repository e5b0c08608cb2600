package logfile

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
)

// genPath names generation k of the live file at path; 1 is the newest.
func genPath(path string, k int) string {
	return path + "." + strconv.Itoa(k)
}

// openGeneration opens generation k of the live file at path. A missing
// generation is not an error but a nil file: rotation shifts names, and a
// failed one can leave a gap.
func openGeneration(path string, k int) (*os.File, os.FileInfo, error) {
	f, err := os.Open(genPath(path, k))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// tempPath names a generation while Rotate writes it. The suffix is not
// a number so nothing mistakes it for a finished generation; it is fixed
// because one path is never rotated twice at once, so Remove finds a
// crashed Rotate's leftover without reading the directory.
func tempPath(path string) string {
	return path + ".rotating"
}

// Remove deletes the live file, generations 1 to generations, any
// generation a crashed Rotate left half-written, and the index. Files
// that do not exist are not an error.
func Remove(path string, generations int) error {
	var errs []error
	remove := func(p string) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	remove(path)
	for k := 1; k <= generations; k++ {
		remove(genPath(path, k))
	}
	remove(tempPath(path))
	errs = append(errs, removeIndex(path)...)
	return errors.Join(errs...)
}
