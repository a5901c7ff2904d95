"""The SFTP server (`manage.py sftpd`): asyncssh serving each user's home as `/`, the shared
folders read-only under common/, through accounts/files.py's rules."""
