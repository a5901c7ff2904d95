"""Users' SSH public keys, for signing in to SFTP (accounts/sftpd): the model, the API
(/api/v2/me/ssh-keys) and the admin site."""
