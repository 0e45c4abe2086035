"""The daemon's state directory on a filesystem of bounded size the soak makes: an ext4 image
(sparse, in the soak's directory) through a loop device, so a full disk is ENOSPC at the block,
not hidden by a tmpfs's page slack. The `disk_full` fault fills it with a file the soak owns
(fallocate, then writes until ENOSPC) and removes that file again. Cleaned up by what it made:
unmount, `losetup -d` of its own device, the image kept only when the soak's directory is."""

import errno
import os
import subprocess
import threading


class StateFs:
    def __init__(self, image, mount_dir, size_mb):
        self.image, self.mount_dir = str(image), str(mount_dir)
        self.device = None
        self.mounted = False
        self.full = threading.Event()  # set while the filler holds the filesystem full
        self.free = threading.Event()
        self.free.set()
        os.makedirs(self.mount_dir, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
        # No blocks kept for root: the daemon (root) meets ENOSPC where the filler did.
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", self.image], check=True, capture_output=True)
        self.device = subprocess.run(["losetup", "--find", "--show", self.image], check=True, capture_output=True,
                                     text=True).stdout.strip()
        try:
            subprocess.run(["mount", "-t", "ext4", "-o", "nosuid,nodev", self.device, self.mount_dir], check=True,
                           capture_output=True)
        except subprocess.CalledProcessError:
            self.close()  # the loop device it made goes
            raise
        self.mounted = True
        os.chmod(self.mount_dir, 0o755)
        self.filler = os.path.join(self.mount_dir, "soak-filler")

    def fill(self):
        """Takes every free block (fallocate, then writes of shrinking size until ENOSPC).
        Returns the bytes taken."""
        self.free.clear()
        self.full.set()
        taken = 0
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            st = os.statvfs(self.mount_dir)
            want = st.f_bfree * st.f_frsize
            if want > 0:
                try:
                    os.posix_fallocate(fd, 0, want)
                    taken = want
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
            os.lseek(fd, 0, os.SEEK_END)
            for size in (1 << 20, 1 << 16, 4096, 512, 1):
                block = b"x" * size
                while True:
                    try:
                        taken += os.write(fd, block)
                    except OSError as e:
                        if e.errno in (errno.ENOSPC, errno.EDQUOT):
                            break
                        raise
            taken = os.fstat(fd).st_blocks * 512  # what it holds (a fallocate refused ENOSPC keeps its blocks)
        finally:
            os.close(fd)
        return taken

    def release(self):
        try:
            os.unlink(self.filler)
        except FileNotFoundError:
            pass
        self.full.clear()
        self.free.set()

    def free_bytes(self):
        st = os.statvfs(self.mount_dir)
        return st.f_bavail * st.f_frsize

    def close(self):
        """Unmounts and lets the loop device go (what this object made, nothing else)."""
        if self.mounted:
            self.release()
            r = subprocess.run(["umount", self.mount_dir], capture_output=True)
            if r.returncode != 0:  # something still holds it: lazily, the device goes at its last user
                subprocess.run(["umount", "-l", self.mount_dir], capture_output=True)
            self.mounted = False
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None

    def remove_image(self):
        try:
            os.unlink(self.image)
        except FileNotFoundError:
            pass
